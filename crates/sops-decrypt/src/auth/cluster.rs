//! `spec.kubeConfig.configMapRef`: a remote cluster reached with a cloud identity instead of
//! a kubeconfig Secret. The ConfigMap names the provider and the cluster
//! (fluxcd/pkg `auth/utils` keys: `provider`, `cluster`, `address`, `ca.crt`,
//! `serviceAccountName`, `audiences`); this module reads it and decides what to ask, in
//! Flux's words when it cannot.

use std::collections::BTreeMap;

use super::AuthError;

/// Which cloud (or none) issues the remote cluster's bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Aws,
    Azure,
    Gcp,
    /// A Kubernetes ServiceAccount token, for a cluster that trusts this one's issuer.
    Generic,
}

/// What a kubeconfig ConfigMap says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterReference {
    pub provider: Provider,
    /// The cloud's name of the cluster (an EKS ARN, a GKE or AKS resource name).
    pub cluster: Option<String>,
    /// The API server's address, when given.
    pub address: Option<String>,
    /// The API server's CA bundle (PEM), when given.
    pub ca_pem: Option<String>,
    /// The ServiceAccount whose identity is used (object-level workload identity).
    pub service_account_name: Option<String>,
    /// Audiences that replace the provider's own for the ServiceAccount token.
    pub audiences: Vec<String>,
}

impl Provider {
    const ALL: [Provider; 4] = [
        Provider::Aws,
        Provider::Azure,
        Provider::Gcp,
        Provider::Generic,
    ];

    /// The name a ConfigMap's `provider` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Azure => "azure",
            Provider::Gcp => "gcp",
            Provider::Generic => "generic",
        }
    }
}

impl ClusterReference {
    /// Reads a kubeconfig ConfigMap's data.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<ClusterReference, AuthError> {
        let named = data.get("provider").map(String::as_str).unwrap_or_default();
        let provider = Provider::ALL
            .into_iter()
            .find(|provider| provider.name() == named)
            .ok_or_else(|| AuthError::Invalid(format!("provider '{named}' not implemented")))?;
        Ok(ClusterReference {
            provider,
            cluster: data.get("cluster").cloned(),
            address: data.get("address").cloned(),
            ca_pem: data.get("ca.crt").cloned(),
            // A Go string: empty names no account, so the default one applies.
            service_account_name: data
                .get("serviceAccountName")
                .filter(|name| !name.is_empty())
                .cloned(),
            audiences: data
                .get("audiences")
                .map(|text| {
                    text.split('\n')
                        .map(str::trim)
                        .filter(|a| !a.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The audiences of the ServiceAccount token the `generic` provider asks for: those
    /// given, else the cluster's address.
    pub fn generic_audiences(&self) -> Vec<String> {
        if self.audiences.is_empty() {
            vec![self.address.clone().unwrap_or_default()]
        } else {
            self.audiences.clone()
        }
    }
}

/// An API server address as fluxcd/pkg canonicalizes it: `https://<host>:<port>`, the host
/// lower-cased and the port 443 unless given; `https://` is assumed without a scheme.
pub fn parse_cluster_address(address: &str) -> Result<String, AuthError> {
    if address.is_empty() {
        return Err(AuthError::Invalid("empty address".into()));
    }
    let with_scheme = if address.starts_with("http") {
        address.to_string()
    } else {
        format!("https://{address}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|e| {
        AuthError::Invalid(format!(
            "failed to parse Kubernetes API server address '{address}': {e}"
        ))
    })?;
    if url.scheme() != "https" {
        return Err(AuthError::Invalid(format!(
            "the Kubernetes API server address '{address}' must use https scheme"
        )));
    }
    let host = url.host_str().unwrap_or_default().to_lowercase();
    let port = url.port().unwrap_or(443);
    Ok(format!("https://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn config_maps_are_read_as_flux_reads_them() {
        let reference = ClusterReference::from_data(&data(&[
            ("provider", "generic"),
            ("address", "https://fleet.example:6443"),
            ("audiences", " one\n\ntwo \n"),
            ("serviceAccountName", "deployer"),
        ]))
        .unwrap();
        assert_eq!(reference.provider, Provider::Generic);
        assert_eq!(reference.service_account_name.as_deref(), Some("deployer"));
        assert_eq!(reference.audiences, ["one", "two"]);
        let unnamed = ClusterReference::from_data(&data(&[
            ("provider", "generic"),
            ("serviceAccountName", ""),
        ]))
        .unwrap();
        assert_eq!(unnamed.service_account_name, None, "empty names no account");
        assert_eq!(reference.generic_audiences(), ["one", "two"]);
        let plain = ClusterReference::from_data(&data(&[
            ("provider", "generic"),
            ("address", "https://fleet.example"),
        ]))
        .unwrap();
        assert_eq!(plain.generic_audiences(), ["https://fleet.example"]);
        assert_eq!(
            ClusterReference::from_data(&data(&[("provider", "openstack")])),
            Err(AuthError::Invalid(
                "provider 'openstack' not implemented".into()
            ))
        );
        assert_eq!(
            ClusterReference::from_data(&BTreeMap::new()),
            Err(AuthError::Invalid("provider '' not implemented".into()))
        );
    }

    #[test]
    fn addresses_are_canonical_as_flux_makes_them() {
        for (address, want) in [
            ("https://Fleet.Example", Ok("https://fleet.example:443".to_string())),
            ("fleet.example:6443", Ok("https://fleet.example:6443".to_string())),
            ("https://10.0.0.1:8443/", Ok("https://10.0.0.1:8443".to_string())),
            ("", Err(AuthError::Invalid("empty address".into()))),
            (
                "http://fleet.example",
                Err(AuthError::Invalid("the Kubernetes API server address 'http://fleet.example' must use https scheme".into())),
            ),
        ] {
            assert_eq!(parse_cluster_address(address), want, "{address}");
        }
    }
}
