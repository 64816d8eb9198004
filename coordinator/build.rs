//! `sqlx::migrate!` embeds `../migrations` when the crate is compiled, but
//! cargo does not know a new migration there changes the crate: this says so.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
