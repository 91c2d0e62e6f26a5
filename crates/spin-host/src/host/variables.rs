//! `fermyon:spin/variables@2.0.0`: a component sees only the variables its manifest entry lists.
use super::HostState;
use crate::bindings::fermyon::spin2_0_0::variables::{Error, Host};
use crate::variables::is_valid_name;

impl Host for HostState {
    async fn get(&mut self, name: String) -> Result<String, Error> {
        if !is_valid_name(&name) {
            return Err(Error::InvalidName(name));
        }
        self.component
            .variables
            .get(&name)
            .cloned()
            .ok_or_else(|| Error::Undefined(format!("no variable '{name}' for component '{}'", self.component.id)))
    }
}
