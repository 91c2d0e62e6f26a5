//! End-to-end tests of the application; filled in separately.
