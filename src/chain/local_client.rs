//! A client of the local stand-in chain (`super::local`): the `Chain` trait over its HTTP/JSON
//! API, as one hotkey or read-only, with the same errors a subtensor client gives.

use super::local::Status;
use super::local_api::{BlockInfo, BlockReply, RoundReply};
use super::{Chain, ChainError, CommitmentRecord, Neuron, TimelockInfo, Timelocked, WeightLimits};

/// A client of the local chain, as one hotkey (or read-only without one).
pub struct LocalClient {
    base_url: String,
    netuid: u16,
    hotkey: Option<String>,
    http: reqwest::Client,
}

impl LocalClient {
    pub fn new(addr: &str, netuid: u16, hotkey: Option<String>) -> Result<LocalClient, ChainError> {
        let base_url = if addr.starts_with("http://") { addr.to_string() } else { format!("http://{addr}") };
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| ChainError::Transport { endpoint: base_url.clone(), message: e.to_string() })?;
        Ok(LocalClient { base_url, netuid, hotkey, http })
    }

    fn transport(&self, e: impl std::fmt::Display) -> ChainError {
        ChainError::Transport { endpoint: self.base_url.clone(), message: e.to_string() }
    }

    /// A request that got no answer, with its cause and, where nothing listens, what to run.
    fn unanswered(&self, e: reqwest::Error) -> ChainError {
        let causes = crate::display::with_causes(&e);
        let message = if e.is_connect() {
            format!(
                "nothing answers there ({causes}): start the local chain with `af chain serve --data DIR --listen {}`, or give the address it listens on",
                self.base_url.trim_start_matches("http://")
            )
        } else {
            causes
        };
        self.transport(message)
    }

    async fn answer<T: serde::de::DeserializeOwned>(&self, response: reqwest::Response) -> Result<T, ChainError> {
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.transport(e))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["error"].as_str().map(String::from))
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(ChainError::Refused(message));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| ChainError::Decode { what: "local chain reply".into(), message: e.to_string() })
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ChainError> {
        let response =
            self.http.get(format!("{}{path}", self.base_url)).send().await.map_err(|e| self.unanswered(e))?;
        self.answer(response).await
    }

    async fn post<T: serde::de::DeserializeOwned>(&self, path: &str, body: serde_json::Value) -> Result<T, ChainError> {
        let response = self
            .http
            .post(format!("{}{path}", self.base_url))
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unanswered(e))?;
        self.answer(response).await
    }

    fn signer(&self) -> Result<&str, ChainError> {
        self.hotkey.as_deref().ok_or(ChainError::NoSigner)
    }

    pub async fn status(&self) -> Result<Status, ChainError> {
        self.get("/v1/status").await
    }

    /// Registers a hotkey (the devnet's stand-in for burned registration).
    pub async fn register(&self, hotkey: &str, validator_permit: bool) -> Result<Neuron, ChainError> {
        self.register_at(hotkey, validator_permit, None).await
    }

    /// Registers the hotkey `spec` names (itself, or a btcli wallet's) on the local chain
    /// `spec` names: `af chain register`, the devnet's stand-in for registration (on
    /// subtensor, btcli registers).
    pub async fn register_named(
        spec: &super::ChainSpec,
        validator_permit: bool,
        replace_uid: Option<u16>,
    ) -> Result<Neuron, ChainError> {
        let refused = |message: &str| ChainError::Spec { endpoint: spec.endpoint.clone(), message: message.into() };
        let addr = spec.endpoint.strip_prefix("local:").ok_or_else(|| {
            refused("registration here is for the local chain only (--chain local:ADDR); on subtensor use btcli")
        })?;
        let hotkey = super::local_hotkey(spec)?.ok_or_else(|| refused("name the hotkey to register: --hotkey HOTKEY (the local chain takes any name), or --wallet NAME [--hotkey NAME] [--wallets-dir DIR] for a btcli wallet's hotkey"))?;
        let client = LocalClient::new(addr, spec.netuid, Some(hotkey.clone()))?;
        client.register_at(&hotkey, validator_permit, replace_uid).await
    }

    /// Registers a hotkey into `replace_uid`, deregistering the hotkey holding it.
    pub async fn register_at(
        &self,
        hotkey: &str,
        validator_permit: bool,
        replace_uid: Option<u16>,
    ) -> Result<Neuron, ChainError> {
        let body = serde_json::json!({
            "netuid": self.netuid, "hotkey": hotkey, "validator_permit": validator_permit, "replace_uid": replace_uid,
        });
        self.post("/v1/register", body).await
    }

    /// subtensor's `swap_hotkey` on this subnet (`local_api`): the uid and what goes with
    /// it move from `old` to `new`; commitments stay under `old`.
    pub async fn swap_hotkey(&self, old: &str, new: &str) -> Result<Neuron, ChainError> {
        let body = serde_json::json!({ "old_hotkey": old, "new_hotkey": new });
        self.post(&format!("/v1/subnets/{}/swap_hotkey", self.netuid), body).await
    }

    pub async fn settings(&self, body: serde_json::Value) -> Result<(), ChainError> {
        let _: BlockReply = self.post(&format!("/v1/subnets/{}/settings", self.netuid), body).await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Chain for LocalClient {
    fn netuid(&self) -> u16 {
        self.netuid
    }

    fn hotkey(&self) -> Option<String> {
        self.hotkey.clone()
    }

    async fn current_block(&self) -> Result<u64, ChainError> {
        Ok(self.status().await?.block)
    }

    async fn serve_axon(&self, ip: std::net::IpAddr, port: u16) -> Result<u64, ChainError> {
        let body = serde_json::json!({ "hotkey": self.signer()?, "ip": ip, "port": port });
        let reply: BlockReply = self.post(&format!("/v1/subnets/{}/axons", self.netuid), body).await?;
        Ok(reply.block)
    }

    async fn axons(&self) -> Result<Vec<super::Axon>, ChainError> {
        self.get(&format!("/v1/subnets/{}/axons", self.netuid)).await
    }

    async fn block_hash(&self, number: u64) -> Result<Option<crate::bytes::Hash32>, ChainError> {
        let response = self
            .http
            .get(format!("{}/v1/blocks/{number}", self.base_url))
            .send()
            .await
            .map_err(|e| self.transport(e))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let info: BlockInfo = self.answer(response).await?;
        Ok(Some(info.hash))
    }

    async fn neurons(&self) -> Result<Vec<Neuron>, ChainError> {
        self.get(&format!("/v1/subnets/{}/neurons", self.netuid)).await
    }

    async fn commit_fields(&self, fields: &[Vec<u8>]) -> Result<u64, ChainError> {
        let fields: Vec<String> = fields.iter().map(hex::encode).collect();
        let body = serde_json::json!({ "hotkey": self.signer()?, "fields": fields });
        let reply: BlockReply = self.post(&format!("/v1/subnets/{}/commit", self.netuid), body).await?;
        Ok(reply.block)
    }

    async fn commitments(&self) -> Result<Vec<CommitmentRecord>, ChainError> {
        self.get(&format!("/v1/subnets/{}/commitments", self.netuid)).await
    }

    async fn set_weights(&self, uids: &[u16], weights: &[u16], version_key: u64) -> Result<u64, ChainError> {
        let body = serde_json::json!({ "hotkey": self.signer()?, "uids": uids, "weights": weights, "version_key": version_key });
        let reply: BlockReply = self.post(&format!("/v1/subnets/{}/weights", self.netuid), body).await?;
        Ok(reply.block)
    }

    async fn weights(&self) -> Result<Vec<(u16, Vec<(u16, u16)>)>, ChainError> {
        self.get(&format!("/v1/subnets/{}/weights", self.netuid)).await
    }

    async fn weight_limits(&self) -> Result<WeightLimits, ChainError> {
        let query = self.hotkey.as_deref().map_or(String::new(), |h| format!("?hotkey={h}"));
        self.get(&format!("/v1/subnets/{}/limits{query}", self.netuid)).await
    }

    fn payload_hotkey(&self) -> Option<Vec<u8>> {
        self.hotkey.as_ref().map(|h| h.as_bytes().to_vec())
    }

    async fn timelock_info(&self) -> Result<TimelockInfo, ChainError> {
        let query = self.hotkey.as_deref().map_or(String::new(), |h| format!("?hotkey={h}"));
        self.get(&format!("/v1/subnets/{}/timelock{query}", self.netuid)).await
    }

    async fn commit_timelocked_weights(
        &self,
        commit: &[u8],
        reveal_round: u64,
        version: u16,
    ) -> Result<u64, ChainError> {
        let body = serde_json::json!({
            "hotkey": self.signer()?, "commit": hex::encode(commit), "reveal_round": reveal_round, "version": version,
        });
        let reply: BlockReply = self.post(&format!("/v1/subnets/{}/timelocked", self.netuid), body).await?;
        Ok(reply.block)
    }

    async fn timelocked(&self) -> Result<Timelocked, ChainError> {
        self.get(&format!("/v1/subnets/{}/timelocked", self.netuid)).await
    }
}

impl LocalClient {
    /// A round's signature from the stand-in beacon (404 until its time has come).
    pub async fn beacon_round(&self, round: u64) -> Result<Vec<u8>, ChainError> {
        let reply: RoundReply = self.get(&format!("/v1/beacon/rounds/{round}")).await?;
        hex::decode(reply.signature)
            .map_err(|e| ChainError::Decode { what: "round signature".into(), message: e.to_string() })
    }
}
