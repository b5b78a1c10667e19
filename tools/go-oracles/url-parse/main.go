// What Go's net/url.Parse answers for addresses such as `--events-addr` takes (Flux's event
// recorder refuses to start on its error): tests/fixtures/go/url-parse.json. Hand-picked
// addresses, then every composition of a few schemes, separators, authorities and tails, and
// random strings over URL characters (a fixed seed).
//
//	go run . > ../../../tests/fixtures/go/url-parse.json   (with Go 1.26, as Flux v1.9.4 is built)
package main

import (
	"encoding/json"
	"math/rand"
	"net/url"
	"os"
	"runtime"
	"sort"
)

func main() {
	inputs := map[string]bool{}
	for _, s := range []string{
		"http://notification-controller.flux-system.svc.cluster.local./",
		"http://notification-controller/", " http://nc/", "http://nc/ ", "\thttp://nc/",
		"http://nc/\n", "://nc", ":8080", "nc:8080", "nc", "/path", "*", "http:", "http:opaque",
		"HTTP://NC/", "http://[::1]:9292/", "http://[::1/", "http://[::1]x/", "http://[1.2.3.4]/",
		"http://[fe80::1%25en0]/", "http://[fe80::1%en0]/", "http://[fe80::1%25%zz]/",
		"http://host:port/", "http://host:/", "http://host:80:90/", "mongodb://a:1,b:2/",
		"http://a b/", "http://a%20b/", "http://a%zzb/", "http://a%C3%A9/", "http://user@host/",
		"http://us er@host/", "http://u:p@host/", "http://u%zz@host/", "http://u@h@host/",
		"http://host/a%zz", "http://host/a%2", "http://host/a%", "http://host/?q=%zz",
		"http://host/#%zz", "http://host/#ok%20", "http://host/\x7f", "http://h\x01/",
		"1http://h/", "h+t-p.x://h/", "-http://h/", "a:b/c", "/a:b", "./a:b", "a/b:c",
		"http://[::1]:80%31/", "http://[::ffff:1.2.3.4]/", "http://[zz]/", "http://ho/st",
		"http://h{}/", "http://h|/", "http://h^/", "http://h`/", "http://h\\/", "http://h!$&'()*+,;=/",
		"http://h<>\"/", "http://é/", "http://h?x", "http://h#x", "http://[]/", "http://[::1]]/",
		"http://h[::1]/", "http://@h/", "http://:80/", "http://%25/", "http://%41/", "http://%8041/",
		"?", "#", "%", "%zz", "a%", "//h:x/", "///h:x/", "http:/h:x", "http:///h:x",
	} {
		inputs[s] = true
	}
	schemes := []string{"", "http", "https", "HtTp", "1x", "x1+.-", "ht tp"}
	separators := []string{"://", ":", ":/", "//", ""}
	authorities := []string{"", "nc", "nc:9292", "nc:x", "[::1]:1", "[::1", "u:p@nc", "u p@nc", "n%zz", "n%41", "n c", "a:1:2"}
	tails := []string{"", "/", "/a", "/%zz", "/a:b", "?a=%zz", "#%zz", "#f", ":x", " "}
	for _, s := range schemes {
		for _, sep := range separators {
			for _, a := range authorities {
				for _, t := range tails {
					inputs[s+sep+a+t] = true
				}
			}
		}
	}
	alphabet := []rune("ab1:/?#[]@%25zZ .-+_~!$&'()*,;=\t\x7fé{}|\\^`<>\"")
	random := rand.New(rand.NewSource(1))
	for len(inputs) < 6000 {
		n := 1 + random.Intn(16)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[random.Intn(len(alphabet))]
		}
		prefix := []string{"", "http://", "https://", "x:"}[random.Intn(4)]
		inputs[prefix+string(r)] = true
	}
	sorted := make([]string, 0, len(inputs))
	for s := range inputs {
		sorted = append(sorted, s)
	}
	sort.Strings(sorted)
	rows := make([][2]string, 0, len(sorted))
	for _, s := range sorted {
		row := [2]string{s, ""}
		if _, err := url.Parse(s); err != nil {
			row[1] = err.Error()
		}
		rows = append(rows, row)
	}
	fixture := map[string]any{
		"source":  "Go " + runtime.Version() + " net/url.Parse",
		"columns": []string{"input", "error"},
		"rows":    rows,
	}
	if err := json.NewEncoder(os.Stdout).Encode(fixture); err != nil {
		panic(err)
	}
}
