// What Go's regexp (RE2 syntax) makes of hand-picked and random patterns: whether it compiles
// each and which of a set of texts it matches. kustomize compiles patch and replacement
// targets, image names and replacement list selectors with it, so the engine's patterns must
// mean what Go's do.
//
//	go run . > ../../../tests/fixtures/go/regexps.json   (the oracle the tests read)
//
// Go's regexp syntax has not changed since Go 1.22 (named groups `(?<name>)`); run with the
// Go release kubectl v1.37 is built with or later.
package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"runtime"
	"strings"
)

var handPicked = []string{
	"${VAR}", "^(?:${VAR})$", "app-${ENV}", "a{VAR}", "a{,3}", "a{01}", "a{2}", "a{1,}", "a{1,2}",
	"a{2,1}", "a{1001}", "{2}", "x}", "}", "{", "a{", "a{1", "a{1,", "\\d+", "\\w+", "\\s", "\\D",
	"\\W", "\\S", "[\\d]", "[^\\D]", "[\\w-]", "\\bx\\b", "\\Bx", "\\Qa.b*\\E", "\\Qa.b", "[a[]",
	"[a&&b]", "[]a]", "[^]a]", "[[:alpha:]]+", "[~]", "[a-]", "[-a]", "[a--]", "[a~~b]", "(?i)app",
	"(?U)a+", "(?s).", "\\pL", "\\p{Greek}", "\\x41", "\\x{41}", "\\.", "\\-", "\\_", "\\y", "\\z",
	"\\Z", "\\A", "(?P<n>a)", "(?<n>a)", "a**", "a*?", "a+?", "a??", "(", ")", "[a", "*a", "a|*",
	"\\", "[\\]]", "[\\[]", "\\C", "\\0", "\\01", "\\8", "\\e", "\\v", "\\f", "\\a", "[:alpha:]",
	"[[:word:]]", "[[:^digit:]]", ".*", "", "^$", "(?m)^a$", "a{0}", "a{0,0}", "(?i)K", "[^\\s]",
	"[\\s\\S]", "\\pN+", "[[:alpha:][:digit:]]", "[a-z&&[^aeiou]]",
}

var texts = []string{
	"", "a", "aa", "aaa", "b", "ab", "x", "a x b", "éxé", "axb", "123", "١٢٣", "a_1", "é", " ",
	"\u00a0", "\t", "${VAR}", "a{VAR}", "a{,3}", "a{01}", "{2}", "x}", "}", "{", "[", "]", "&", "~",
	"-", "a.b*", "a.bc", "A", "K", "\u212a", "Ω", "\n", "app-${ENV}", "my-app", "0", "a{", "\\",
}

// tokens random patterns are made of.
var tokens = []string{
	"a", "b", "x", "é", "0", "1", "2", ".", "*", "+", "?", "{", "}", ",", "[", "]", "^", "$", "(",
	")", "|", "\\d", "\\w", "\\s", "\\b", "\\D", "\\Q", "\\E", "&", "~", "-", ":", "[:alpha:]",
	"\\", "\\.", "{1}", "{1,2}", "{,2}", "(?i)", "$", "{VAR}",
}

type row struct {
	Pattern string `json:"pattern"`
	Error   string `json:"error,omitempty"`
	// Matches has a 1 for each text the pattern matches, a 0 for each it does not.
	Matches string `json:"matches,omitempty"`
}

func main() {
	random := rand.New(rand.NewSource(1))
	patterns := append([]string{}, handPicked...)
	for len(patterns) < 3000 {
		var b strings.Builder
		for n := 1 + random.Intn(6); n > 0; n-- {
			b.WriteString(tokens[random.Intn(len(tokens))])
		}
		patterns = append(patterns, b.String())
	}
	rows := make([]row, 0, len(patterns))
	for _, pattern := range patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			rows = append(rows, row{Pattern: pattern, Error: err.Error()})
			continue
		}
		var matches strings.Builder
		for _, text := range texts {
			if re.MatchString(text) {
				matches.WriteByte('1')
			} else {
				matches.WriteByte('0')
			}
		}
		rows = append(rows, row{Pattern: pattern, Matches: matches.String()})
	}
	out := map[string]any{
		"source": fmt.Sprintf("tools/go-oracles/regexp, %s", runtime.Version()),
		"texts":  texts,
		"rows":   rows,
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	if err := encoder.Encode(out); err != nil {
		panic(err)
	}
}
