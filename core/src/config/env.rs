//! The environment as the config steps read it: trimmed, empty means unset, numbers
//! parsed with the variable's name in the error. Nothing outside `config` uses it.

use super::{ConfigError, malformed};

pub(super) struct Env<'a> {
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'_> {
    pub(super) fn get(&self, name: &'static str) -> Option<String> {
        (self.lookup)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }
    pub(super) fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.get(name).ok_or(ConfigError::Missing(name))
    }
    pub(super) fn list(&self, name: &'static str) -> Vec<String> {
        self.get(name)
            .map(|v| v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }
    pub(super) fn number(&self, name: &'static str, default: u64) -> Result<u64, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| malformed(name, "not a whole number")),
        }
    }
}
