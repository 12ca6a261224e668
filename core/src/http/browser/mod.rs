//! The cookie lane of people: sign-in and `/account`, the observer lane, the room pages
//! (`/chat`, `/rooms` and the identity in an environment) and the run console. Built on
//! the `pages` kit; never reads `Authorization`: nothing here imports `agent`.

pub mod account;
pub mod observer;
pub mod room_admin;
mod room_embodiment;
pub mod room_pages;
pub mod run_console;
