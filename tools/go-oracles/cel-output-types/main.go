// The output type cel-go's checker gives readyExpr-like expressions in Flux's environment
// (fluxcd/pkg runtime/cel NewExpression with WithCompile and WithStructVariables("self", "dep"):
// both google.protobuf.Struct), or its compile error: tests/fixtures/go/cel-output-types.json.
// Flux refuses a dependency's readyExpr whose output type is not exactly bool.
//
// cel-go cannot be fetched here, so this runs inside a Kubernetes source tree, which vendors it
// (v1.28: cel-go v0.16.1, against Flux's v0.26; the checker's typing of these is the same):
//
//	mkdir $K8S/cmd/celoracle && cp main.go $K8S/cmd/celoracle/ && cd $K8S &&
//	go run -mod=vendor ./cmd/celoracle > tests/fixtures/go/cel-output-types.json
package main

import (
	"encoding/json"
	"os"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

var expressions = []string{
	// Flux's own rows (runtime/cel expression_test.go, kustomization_dependson_test.go).
	"'foo'", "foo.bar.baz", "self.bar.baz", "self.bar.baz == true",
	"self.metadata.annotations['app/version'] == dep.metadata.annotations['app/version']",
	"self.generation == deps.generation",
	// Literals and variables.
	"true", "false", "1", "1u", "1.5", "b'x'", "null", "self", "dep", "[]", "{}", "[1, 2]",
	"['a']", "{'a': 1}", "{'a': true}['a']", "[true][0]", "[[true]][0]", "[self][0]",
	// Selection and indexing.
	"dep.status", "dep.status.ready", "dep.metadata.generation", "dep.status.conditions[0]",
	"dep.status.conditions[0].status", "dep['status']", "has(dep.status)", "has(dep.status.ready)",
	"!has(dep.status.ready)",
	// Operators.
	"dep.status.ready == true", "dep.status.ready != false", "dep.a < dep.b", "dep.a <= 1",
	"dep.a > 1.5", "dep.a >= 'x'", "'a' in ['a']", "'a' in dep.metadata.labels",
	"dep.a && dep.b", "dep.a || true", "!dep.a", "!true", "dep.a && false",
	"1 + 1", "1u + 2u", "1.0 + 2.0", "'a' + 'b'", "b'a' + b'b'", "[1] + [2]", "dep.a + 1",
	"dep.a + dep.b", "1 - 1", "2 * 3", "6 / 2", "7 % 2", "-1", "-1.5", "-dep.a", "2.0 * 1.5",
	"true ? true : false", "true ? 1 : 2", "true ? 'a' : 'b'", "dep.a ? true : false",
	"true ? dep.a : false", "true ? true : dep.a", "true ? dep.a : dep.b",
	"dep.generation == dep.status.observedGeneration",
	"dep.metadata.generation == dep.status.observedGeneration && dep.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
	// Functions.
	"size(dep.a)", "dep.a.size()", "size('abc')", "'abc'.size()", "size([1])",
	"dep.metadata.name.startsWith('x')", "dep.metadata.name.endsWith('x')",
	"dep.metadata.name.contains('x')", "dep.metadata.name.matches('x')", "matches('a', 'b')",
	"'abc'.startsWith('a')", "'abc'.lowerAscii()", "dep.a.lowerAscii()", "'abc'.upperAscii()",
	"' a '.trim()", "'abc'.replace('a', 'b')", "'abc'.substring(1)", "'abc'.charAt(1)",
	"'abc'.indexOf('b')", "'abc'.lastIndexOf('b')", "'a,b'.split(',')", "['a'].join(',')",
	"'%s'.format(['a'])", "strings.quote('a')", "'abc'.reverse()",
	"base64.encode(b'a')", "base64.decode('YQ==')", "sets.contains([1], [1])",
	"sets.equivalent([1], [1])", "sets.intersects([1], [1])",
	"int('1')", "uint(1)", "double(1)", "string(1)", "bytes('a')", "bool('true')", "dyn(1)",
	"dyn(true)", "duration('1s')", "timestamp('2024-01-01T00:00:00Z')", "type(1)",
	"timestamp('2024-01-01T00:00:00Z').getFullYear()", "duration('1s').getSeconds()",
	"int(dep.a)", "string(dep.a) == 'x'", "bool(dep.a)",
	// Macros.
	"dep.status.conditions.exists(c, c.type == 'Ready')",
	"dep.status.conditions.all(c, c.status == 'True')",
	"dep.status.conditions.exists_one(c, c.type == 'Ready')",
	"dep.status.conditions.map(c, c.type)", "dep.status.conditions.filter(c, c.type == 'Ready')",
	"dep.status.conditions.map(c, c.type == 'Ready')",
	"dep.status.conditions.map(c, c.type == 'Ready')[0]",
	"dep.status.conditions.filter(c, c.type == 'Ready')[0]",
	"dep.status.conditions.filter(c, c.type == 'Ready').size() == 1",
	"[1, 2].map(x, x * 2)", "[1, 2].map(x, x > 1)", "[1, 2].map(x, x > 1)[0]",
	"[true, false].filter(x, x)[0]", "[1, 2].exists(x, x > 1)", "{'a': 1}.all(k, k == 'a')",
	"{'a': true}.map(k, k)", "[1, 2].map(x, x > 1, x)", "[[1]].map(x, x)[0]",
	"dep.status.conditions.map(c, c.status)[0] == 'True'",
	// Optional types.
	"dep.?status", "dep.?status.ready", "dep.?status.ready.orValue(false)",
	"dep.?status.orValue(false)", "dep.?status.hasValue()", "optional.of(true)",
	"optional.of(true).value()", "optional.of(true).orValue(false)", "optional.none()",
	"optional.of(1).orValue(2)", "dep[?'status']", "dep.?status.value()",
	"optional.ofNonZeroValue(true)", "[1].first()", "dep.?a.or(optional.of(1))",
	// Errors cel-go's checker finds.
	"self == 'bar'", "1 == 'a'", "'a' + 1", "true + true", "[1, 'a']", "foo", "x.y",
	"dep.a.b.c == 1 && 'a'", "size(1)", "1.startsWith('a')", "'a'.nosuch()", "nosuch(1)",
	// Operators' overloads.
	"1 == 1.0", "1 == 1u", "[1] == ['a']", "[1] == [dep.a]", "dep.a == 'x'",
	"{'a': 1} == {'a': 'b'}", "null == 1", "null == self", "self == null", "null == null",
	"1 < 1.0", "1 < 1u", "'a' < 1", "'a' < 'b'", "1 + 1.0", "'a' in 1", "1 in ['a']",
	"1 in {'a': 1}", "'a' in {'a': 1}", "!1", "1 && true", "true || 'a'", "true ? 1 : 'a'",
	"1 ? true : false", "self.x + 1 == 'a'", "self == dep", "self == {'a': 1}",
	"self.a == 1 || 2", "dep.a || 'x'", "-'a'", "'a' - 'b'", "b'a' < b'b'", "true < false",
	"[1] < [2]", "self.?a == 1", "self.?a == optional.of(1)", "duration('1s') < duration('2s')",
	"timestamp('2024-01-01T00:00:00Z') == 1", "duration('1s') == 1", "1 == true",
	"(1 == 'a') == true", "1 == 'a' || 2 == 'b'", "[1, 2] == [1]", "{1: 'a'} == {'a': 1}",
	"1 % 2.0", "2.0 % 1.0", "1u - 1", "[1] + ['a']", "[1] + [2]", "b'a' + 'b'", "-true",
	"-1u", "dep.a in dep.b", "[self][0] == 'x'", "{'a': self}['a'] == 1",
	// Time.
	"timestamp('2024-01-01T00:00:00Z') - duration('1h')", "timestamp('2024-01-01T00:00:00Z') + duration('1h')",
	"duration('1h') + timestamp('2024-01-01T00:00:00Z')", "duration('1h') + duration('1m')",
	"duration('1h') - duration('1m')", "timestamp(dep.a) - timestamp(dep.b)",
	"timestamp(dep.a) - duration('1h') < timestamp(dep.b)", "duration('1h') - timestamp(dep.a)",
	"timestamp(dep.a) + timestamp(dep.b)", "duration('1h') * 2", "timestamp(dep.a) < timestamp(dep.b)",
	"[1, 2.0]", "[dep.a, 1, 'a']", "[1, dep.a, 'a']", "{'a': 1, 1: 'a'}",
	"dep.status.conditions.exists(c, c.status == 1 && c.type == 'a')", "[1].all(x, x == 'a')",
	"[1].map(x, x == 'a')", "[1].filter(x, x + 'a' == 'b')", "{'a': 1}.exists(k, k == 1)",
	// What readyExpr authors write.
	"dep.status.conditions.filter(c, c.type == 'Ready').all(c, c.status == 'True')",
	"self.metadata.labels['env'] == 'prod' && dep.metadata.?labels['env'].orValue('') == 'prod'",
	"dep.status.lastAppliedRevision.startsWith('main@')",
	"dep.status.observedGeneration >= dep.metadata.generation",
	"timestamp(dep.status.conditions[0].lastTransitionTime) < timestamp(self.metadata.creationTimestamp)",
	"timestamp(dep.status.conditions[0].lastTransitionTime) + duration('5m') < timestamp(self.metadata.creationTimestamp)",
	"size(dep.status.inventory.entries) > 0", "dep.spec.suspend == false || !has(dep.spec.suspend)",
	"'app' in dep.metadata.labels && dep.metadata.labels.app == 'x'",
	"dep.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True' && c.reason != 'Progressing')",
	"int(dep.metadata.annotations['replicas']) > 2", "dep.metadata.name.matches('^app-[0-9]+$')",
	"[1, 2, 3].all(x, x > 0) && dep.a", "dep.a.map(x, x.b).exists(y, y == 1)",
	"dep.?status.?conditions.orValue([]).exists(c, c.type == 'Ready')",
	"dep.status.conditions.size() > 0 ? dep.status.conditions[0].status == 'True' : false",
	"double(dep.a) / 2.0 > 1.5", "dep.a + 1 > 2u", "string(dep.metadata.generation) + 'x' == '1x'",
	"dep.metadata.annotations.exists_one(k, k.startsWith('x'))",
	"duration(dep.spec.interval) > duration('5m')", "dep.a in [1, 2, 3]",
	"dep.spec.dependsOn.map(d, d.name).exists(n, n == self.metadata.name)",
	"!(dep.status.ready == false)", "sets.contains(dep.a, ['x'])", "base64.decode(dep.a) == b'x'",
	"dep.status.conditions.filter(c, c.type == 'Ready').size() == 1 && dep.status.conditions.filter(c, c.type == 'Ready')[0].status == 'True'",
	"self.metadata.?labels.env.orValue('dev') == 'dev'",
	"dep.metadata.annotations['x'].lowerAscii() == 'true'", "{'a': dep.a}.a == 1",
	"[dep.a, dep.b].all(x, x)", "dep.a == null", "self.x == null || dep.y != null",
	"[1, 2].map(x, [x]).exists(l, l[0] == 1)", "{'a': [1]}['a'][0] == 1",
	"dep.a.exists(x, x) || [true].exists(x, x)", "dep.metadata.generation - 1 == self.metadata.generation",
	"dep.status.conditions.all(c, c.status in ['True', 'Unknown'])",
	// Functions' overloads.
	"size(true)", "size(null)", "size(1.5)", "size(b'a') == 1", "size({'a': 1}) == 1", "size('a', 'b')",
	"'a'.size() == 1", "1.size()", "'a'.contains(1)", "'a'.startsWith()", "'a'.endsWith('a', 'b')",
	"'a'.charAt('x') == 'a'", "1.lowerAscii()", "'a'.substring('x')", "'abc'.substring(1, 2) == 'b'",
	"dep.a.contains(1)", "base64.encode('a')", "base64.decode(b'a')", "matches(1, 'a')",
	"'a'.matches(1)", "'abc'.indexOf('b', 'x')", "'abc'.indexOf('b', 1) == 1", "[1].join(',')",
	"['a'].join(1)", "['a'].join() == 'a'", "'%s'.format('x')", "'a'.replace('a', 1)",
	"'a'.replace('a', 'b', 1) == 'b'", "'a,b'.split(',', 1).size() == 1", "'a'.split(1)",
	"'a'.trim(1)", "int(true)", "int([1])", "int(1.5) == 1", "int('1') == 1",
	"int(timestamp('2024-01-01T00:00:00Z')) > 0", "int(duration('1s')) == 1", "uint(true)",
	"uint('1') == 1u", "double(true)", "double('1.5') == 1.5", "string(true) == 'true'",
	"string([1])", "string(b'a') == 'a'", "string(timestamp('2024-01-01T00:00:00Z')) != ''",
	"bytes(1)", "bytes('a') == b'a'", "bool(1)", "bool('true')", "duration(1)", "duration(duration('1s')) == duration('1s')",
	"timestamp(1) == timestamp(1)", "timestamp(true)", "timestamp(timestamp(1)) == timestamp(1)",
	"timestamp(1).getFullYear('UTC') > 0", "timestamp(1).getFullYear(1)", "duration('1s').getFullYear()",
	"'a'.getHours()", "duration('1s').getHours() == 0", "sets.contains([1], 1)", "sets.contains([1], ['a'])",
	"strings.quote(1)", "[1].size() == 1", "{'a': 1}.size() == 1", "dep.a.size() == 1",
	"dep.a.startsWith(dep.b)", "'a'.startsWith(dep.b)", "size(dep.a) == 1", "int(dep.a) == 1",
	// The optional library's overloads.
	"1.value()", "1.hasValue()", "dep.a.value() == 1", "dep.a.hasValue()", "optional.of(1).value() == 1",
	"optional.of(1).orValue('a')", "optional.of(1).orValue(2) == 2", "optional.of(1).or(optional.of('a'))",
	"optional.of(1).or(1)", "optional.of(1).or(optional.none()).hasValue()", "dep.?a.orValue(1) == 1",
	"'a'.orValue('b')", "optional.none().orValue(1) == 1", "optional.of(1).hasValue(1)",
	"dep.?a.or(dep.?b).hasValue()", "optional.of()", "optional.none(1)",
	// Macros' steps, misspelled namespaced functions.
	"dep.a.filter(x, x in ['a']).exists(y, y == 1)", "[1, 2].map(x, x in [1], 'a') == ['a']",
	"[1, 2].map(x, x in [1], 'a')", "dep.a.filter(x, x in ['a'])", "sets.contain([1], [1])",
	"optional.off(1)", "[[[1]].map(x, x.map(y, y))].map(z, z)",
}

func main() {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
		cel.Variable("self", cel.ObjectType("google.protobuf.Struct")),
		cel.Variable("dep", cel.ObjectType("google.protobuf.Struct")),
	)
	if err != nil {
		panic(err)
	}
	rows := make([][3]string, 0, len(expressions))
	for _, expression := range expressions {
		row := [3]string{expression, "", ""}
		if checked, issues := env.Compile(expression); issues != nil && issues.Err() != nil {
			row[2] = issues.String()
		} else {
			row[1] = checked.OutputType().String()
		}
		rows = append(rows, row)
	}
	fixture := map[string]any{
		"source":  "cel-go v0.16.1 (vendored by Kubernetes v1.28) Env.Compile in fluxcd/pkg runtime/cel's environment, self and dep google.protobuf.Struct",
		"columns": []string{"expression", "output type", "compile error"},
		"rows":    rows,
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(fixture); err != nil {
		panic(err)
	}
}
