module yamldocumentsoracle

go 1.26.0

require (
	go.yaml.in/yaml/v3 v3.0.4
	sigs.k8s.io/yaml v1.6.0
)

require go.yaml.in/yaml/v2 v2.4.2 // indirect

// No module proxy is reachable here: each module is a directory extracted from a `fetch`ed
// repository at the tag kustomize-controller v1.9.4 pins (tools/go-oracles/go-src.sh).
replace (
	github.com/google/go-cmp => ../../../target/go-src/stub/go-cmp
	go.yaml.in/yaml/v2 => ../../../target/go-src/yamlv2
	go.yaml.in/yaml/v3 => ../../../target/go-src/yamlv3
	gopkg.in/check.v1 => ../../../target/go-src/stub/check
	sigs.k8s.io/randfill => ../../../target/go-src/stub/randfill
	sigs.k8s.io/yaml => ../../../target/go-src/yaml
)
