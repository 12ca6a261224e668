//! Account policy set through the service, as the operator's tools set it: the flags a test
//! needs before it acts (developer, guest, locks). Knows the account service only.

use helix_core::domain::account::PolicyChange;

use crate::TestApp;

impl TestApp {
    /// Applies `change` to the policy of `subject` (of the configured provider).
    pub async fn set_policy(&self, subject: &str, change: PolicyChange) {
        let provider = self.state.services.config.oauth.provider.clone();
        self.state.services.accounts.set_policy(&provider, subject, &change).await.unwrap();
    }

    /// Marks `subject` a developer (who may create room sources).
    pub async fn developer(&self, subject: &str) {
        self.set_policy(subject, PolicyChange { developer: Some(true), ..Default::default() }).await;
    }
}
