// What go-yaml makes of random YAML documents, in both readings the project follows: go-yaml
// v3 reading a node, writing it back as kyaml writes (styles kept) and decoding that into Go
// values then JSON, as kustomize reads and prints resources; and
// sigs.k8s.io/yaml's YAMLToJSON (go-yaml v2: kustomization files, Flux's reading of
// substituted manifests). The documents mix every construct — block and flow collections,
// plain, quoted and block scalars with indicators, anchors, aliases and merge keys, tags,
// comments, document markers — with what goes wrong in real files: tabs, carriage returns,
// trailing blanks, odd indentation, a BOM.
//
//	go run . > ../../../tests/fixtures/go/yaml-documents.json
//
// Modules from tools/go-oracles/go-src.sh, as for ../flux-substitute; GOFLAGS=-mod=mod
// GOPROXY=off, Go 1.26.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"

	v3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

var plains = []string{
	"word", "two words", "yes", "on", "off", "y", "n", "~", "null", "true", "False", "1", "-1", "+1",
	"0x1F", "0o17", "017", "1_000", "1.5", ".5", "1e3", "1.10", "+.inf", "1:20", "2001-12-14",
	"2001-12-14T21:59:43Z", "a:b", "a #b", "é", "a\tb", "-", "--x", "a@", "a%", "x,y", "x]y", "x}y",
	"12345678901234567890", "-9223372036854775809", "0b101", "=", "<<", "? q", "a: b", "- x", "|", ">",
}

var keys = []string{"a", "b", "key", "x y", "on", "1", "1.5", "null", "~", "true", "<<", "'q'",
	"\"d\"", "k:", "a-b", "é", "2001-12-14"}

type gen struct {
	r       *rand.Rand
	anchors int
}

func (g *gen) pick(list []string) string { return list[g.r.Intn(len(list))] }

func (g *gen) props() string {
	var out string
	if g.r.Intn(12) == 0 {
		g.anchors++
		out += fmt.Sprintf("&a%d ", g.anchors)
	}
	if g.r.Intn(25) == 0 {
		out += g.pick([]string{"!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!foo ", "! ", "!!map ", "!!seq ", "!!binary "})
	}
	return out
}

func (g *gen) scalar(indent int, flow bool) string {
	switch g.r.Intn(10) {
	case 0:
		return "'" + strings.ReplaceAll(g.pick(plains), "'", "''") + "'"
	case 1:
		return "\"" + g.pick([]string{"x", "a\\tb", "\\u00e9", "\\x41", "\\N", "\\_", "\\L", "line\\nbreak", "\\\"q\\\"", "a\\\n  b", "\\/"}) + "\""
	case 2:
		if flow {
			return g.pick(plains)
		}
		pad := strings.Repeat(" ", indent+2)
		head := g.pick([]string{"|", ">", "|-", ">+", "|2", ">-", "|+"})
		body := pad + "one\n" + pad + g.pick([]string{"two", " more", "", "\tthree"}) + "\n"
		if g.r.Intn(3) == 0 {
			body += "\n" + pad + "last\n"
		}
		return head + "\n" + body[:len(body)-1]
	case 3:
		if g.anchors > 0 {
			return fmt.Sprintf("*a%d", 1+g.r.Intn(g.anchors))
		}
	}
	return g.props() + g.pick(plains)
}

func (g *gen) node(depth, indent int, flow bool) string {
	top := depth == 0
	if !top && (depth > 3 || g.r.Intn(3) == 0) {
		return g.scalar(indent, flow)
	}
	if !top && (flow || g.r.Intn(5) == 0) {
		if g.r.Intn(2) == 0 {
			items := []string{}
			for i := g.r.Intn(3); i >= 0; i-- {
				items = append(items, g.node(depth+1, indent, true))
			}
			return g.props() + "[" + strings.Join(items, ", ") + "]"
		}
		items := []string{}
		for i := g.r.Intn(3); i >= 0; i-- {
			key := fmt.Sprintf("f%d", i)
			if g.r.Intn(15) == 0 {
				key = g.pick(keys)
			}
			items = append(items, key+": "+g.node(depth+1, indent, true))
		}
		return g.props() + "{" + strings.Join(items, ", ") + "}"
	}
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	if !top && g.r.Intn(2) == 0 {
		for i := g.r.Intn(3); i >= 0; i-- {
			child := g.node(depth+1, indent+2, false)
			b.WriteString("\n" + pad + "- " + strings.TrimLeft(child, "\n "))
		}
	} else {
		used := map[string]bool{}
		for i := g.r.Intn(4); i >= 0; i-- {
			key := fmt.Sprintf("k%d", i)
			if g.r.Intn(15) == 0 {
				key = g.pick(keys)
			}
			if used[key] {
				continue
			}
			used[key] = true
			if key == "<<" && g.anchors > 0 && g.r.Intn(2) == 0 {
				b.WriteString(fmt.Sprintf("\n%s<<: *a%d", pad, 1+g.r.Intn(g.anchors)))
				continue
			}
			child := g.node(depth+1, indent+2, false)
			sep := " "
			if strings.HasPrefix(child, "\n") {
				sep = ""
			}
			b.WriteString("\n" + pad + key + ":" + sep + child)
			if g.r.Intn(8) == 0 {
				b.WriteString(" # note")
			}
		}
	}
	return b.String()
}

func (g *gen) document() string {
	doc := strings.TrimLeft(g.node(0, 0, false), "\n") + "\n"
	switch g.r.Intn(14) {
	case 0:
		doc = strings.ReplaceAll(doc, "\n", "\r\n")
	case 1:
		doc = strings.ReplaceAll(doc, "\n", "\r")
	case 2:
		doc = "---\n" + doc + "...\n"
	case 3:
		doc = strings.ReplaceAll(doc, "\n", " \n")
	case 4:
		doc = "\ufeff" + doc
	case 5:
		i := g.r.Intn(len(doc))
		doc = doc[:i] + "\t" + doc[i:]
	case 6:
		doc = "# head\n" + doc + "# foot\n"
	case 7:
		doc = strings.ReplaceAll(doc, "  ", "    ")
	}
	return doc
}

func read(doc string) (string, string, string, string) {
	var v3json, v3err, v2json, v2err string
	// kyaml reads a node, writes it back and reads that (kustomize's output), styles kept.
	var node v3.Node
	var out interface{}
	if err := v3.Unmarshal([]byte(doc), &node); err != nil {
		v3err = err.Error()
	} else if written, err := kyamlWrite(&node); err != nil {
		v3err = err.Error()
	} else if err := v3.Unmarshal(written, &out); err != nil {
		v3err = err.Error()
	} else if b, err := json.Marshal(out); err != nil {
		v3err = err.Error()
	} else {
		v3json = string(b)
	}
	if b, err := yaml.YAMLToJSON([]byte(doc)); err != nil {
		// Which unsupported key it names depends on Go's map order: only its type is kept.
		v2err, _, _ = strings.Cut(err.Error(), ", key:")
	} else {
		v2json = string(b)
	}
	return v3json, v3err, v2json, v2err
}

// A node written as kyaml writes one (kyaml/yaml/alias.go): two-space indent, sequences
// compact under their key.
func kyamlWrite(node *v3.Node) ([]byte, error) {
	var b bytes.Buffer
	e := v3.NewEncoder(&b)
	e.SetIndent(2)
	e.CompactSeqIndent()
	if err := e.Encode(node); err != nil {
		return nil, err
	}
	return b.Bytes(), e.Close()
}

func main() {
	g := &gen{r: rand.New(rand.NewSource(2026))}
	fmt.Println(`{"source":"go-yaml v3.0.4 Unmarshal + encoding/json, and sigs.k8s.io/yaml v1.6.0 YAMLToJSON (go-yaml v2.4.4); tools/go-oracles/yaml-documents",`)
	fmt.Println(`"columns":["document","v3 json","v3 error","v2 json","v2 error"],"rows":[`)
	const n = 3000
	for i := 0; i < n; i++ {
		g.anchors = 0
		doc := g.document()
		a, b, c, d := read(doc)
		row, _ := json.Marshal([]string{doc, a, b, c, d})
		sep := ","
		if i == n-1 {
			sep = ""
		}
		fmt.Printf("%s%s\n", row, sep)
	}
	fmt.Println("]}")
}
