//! The desktop core's tests, one module per file, in one test binary;
//! `support` starts what they share (a Secret Service, a coordinator).

mod keychain;
mod manners;
mod sandbox;
mod supervisor;
mod support;
