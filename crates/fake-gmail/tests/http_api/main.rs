//! The fake driven over real HTTP, as the gmail component and other processes drive it.
mod control;
mod drafts;
mod faults;
mod messages;
mod oauth;
mod support;
