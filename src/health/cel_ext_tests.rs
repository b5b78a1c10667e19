//! Expectations from cel-go v0.26.1's own tables (`ext/strings_test.go`,
//! `ext/encoders_test.go`, `ext/sets_test.go`), for the functions Flux's environment has.

use super::context;

fn evaluate(expression: &str) -> Result<cel::Value, String> {
    let program = cel::Program::compile(expression).map_err(|e| e.to_string())?;
    program.execute(&context()).map_err(|e| e.to_string())
}

fn holds(expressions: &[&str]) {
    for expression in expressions {
        assert_eq!(
            evaluate(expression),
            Ok(cel::Value::Bool(true)),
            "{expression}"
        );
    }
}

fn fails(cases: &[(&str, &str)]) {
    for (expression, error) in cases {
        let result = evaluate(expression);
        assert!(
            result.as_ref().is_err_and(|e| e.contains(error)),
            "{expression}: {result:?}, wanted an error with {error:?}"
        );
    }
}

#[test]
fn strings_as_cel_go() {
    holds(&[
        "'tacocat'.charAt(3) == 'o'",
        "'tacocat'.charAt(7) == ''",
        "'©αT'.charAt(0) == '©' && '©αT'.charAt(1) == 'α' && '©αT'.charAt(2) == 'T'",
        "'tacocat'.indexOf('') == 0",
        "'tacocat'.indexOf('ac') == 1",
        "'tacocat'.indexOf('none') == -1",
        "'tacocat'.indexOf('', 3) == 3",
        "'tacocat'.indexOf('a', 3) == 5",
        "'tacocat'.indexOf('at', 3) == 5",
        "'ta©o©αT'.indexOf('©') == 2",
        "'ta©o©αT'.indexOf('©', 3) == 4",
        "'ta©o©αT'.indexOf('©αT', 3) == 4",
        "'ta©o©αT'.indexOf('©α', 5) == -1",
        "'ijk'.indexOf('k') == 2",
        "'hello wello'.indexOf('hello wello') == 0",
        "'hello wello'.indexOf('ello', 6) == 7",
        "'hello wello'.indexOf('elbo room!!') == -1",
        "'hello wello'.indexOf('elbo room!!!') == -1",
        "''.lastIndexOf('@@') == -1",
        "'tacocat'.lastIndexOf('') == 7",
        "'tacocat'.lastIndexOf('at') == 5",
        "'tacocat'.lastIndexOf('none') == -1",
        "'tacocat'.lastIndexOf('', 3) == 3",
        "'tacocat'.lastIndexOf('a', 3) == 1",
        "'ta©o©αT'.lastIndexOf('©') == 4",
        "'ta©o©αT'.lastIndexOf('©', 3) == 2",
        "'ta©o©αT'.lastIndexOf('©α', 4) == 4",
        "'hello wello'.lastIndexOf('ello', 6) == 1",
        "'hello wello'.lastIndexOf('low') == -1",
        "'hello wello'.lastIndexOf('elbo room!!') == -1",
        "'hello wello'.lastIndexOf('elbo room!!!') == -1",
        "'hello wello'.lastIndexOf('hello wello') == 0",
        "'bananananana'.lastIndexOf('nana', 7) == 6",
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCÆt'.lowerAscii() == 'tacocÆt'",
        "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'",
        "\"12 days 12 hours\".replace(\"{0}\", \"2\") == \"12 days 12 hours\"",
        "\"{0} days {0} hours\".replace(\"{0}\", \"2\") == \"2 days 2 hours\"",
        "\"{0} days {0} hours\".replace(\"{0}\", \"2\", 1).replace(\"{0}\", \"23\") == \"2 days 23 hours\"",
        "\"1 ©αT taco\".replace(\"αT\", \"o©α\") == \"1 ©o©α taco\"",
        "\"hello hello\".replace(\"\", \"_\") == \"_h_e_l_l_o_ _h_e_l_l_o_\"",
        "\"hello hello\".replace(\"h\", \"\") == \"ello ello\"",
        "\"hello world\".split(\" \") == [\"hello\", \"world\"]",
        "\"hello world events!\".split(\" \", 0) == []",
        "\"hello world events!\".split(\" \", 1) == [\"hello world events!\"]",
        "\"o©o©o©o\".split(\"©\", -1) == [\"o\", \"o\", \"o\", \"o\"]",
        "\"tacocat\".substring(4) == \"cat\"",
        "\"tacocat\".substring(7) == \"\"",
        "\"tacocat\".substring(0, 4) == \"taco\"",
        "\"tacocat\".substring(4, 4) == \"\"",
        "'ta©o©αT'.substring(2, 6) == \"©o©α\"",
        "'ta©o©αT'.substring(7, 7) == \"\"",
        "\" \\f\\n\\r\\t\\vtext  \".trim() == \"text\"",
        "\"\\u0085\\u00a0\\u1680text\".trim() == \"text\"",
        "\"text\\u2000\\u2001\\u2002\\u2003\\u2004\\u2004\\u2006\\u2007\\u2008\\u2009\".trim() == \"text\"",
        "\"\\u200atext\\u2028\\u2029\\u202F\\u205F\\u3000\".trim() == \"text\"",
        "\"\\u180etext\\u200b\\u200c\\u200d\\u2060\\ufeff\".trim() == \"\\u180etext\\u200b\\u200c\\u200d\\u2060\\ufeff\"",
        "'tacoCat'.upperAscii() == 'TACOCAT'",
        "'tacoCαt'.upperAscii() == 'TACOCαT'",
        "'gums'.reverse() == 'smug'",
        "'palindromes'.reverse() == 'semordnilap'",
        "'John Smith'.reverse() == 'htimS nhoJ'",
        "'u180etext'.reverse() == 'txete081u'",
        "'2600+U'.reverse() == 'U+0062'",
        "['x', 'y'].join() == 'xy'",
        "['x', 'y'].join('-') == 'x-y'",
        "[].join() == ''",
        "[].join('-') == ''",
        "strings.quote(\"first\\nsecond\") == \"\\\"first\\\\nsecond\\\"\"",
        "strings.quote(\"bell\\a\") == \"\\\"bell\\\\a\\\"\"",
        "strings.quote(\"\\bbackspace\") == \"\\\"\\\\bbackspace\\\"\"",
        "strings.quote(\"horizontal tab\\t\") == \"\\\"horizontal tab\\\\t\\\"\"",
        "strings.quote(\"verbatim\") == \"\\\"verbatim\\\"\"",
        "strings.quote(\"ends with \\\\\") == \"\\\"ends with \\\\\\\\\\\"\"",
        "strings.quote(\"mid string \\\" quote\") == \"\\\"mid string \\\\\\\" quote\\\"\"",
        "strings.quote(\"ta©o©αT\") == \"\\\"ta©o©αT\\\"\"",
        "strings.quote(\"\") == \"\\\"\\\"\"",
        "'tacocat'.indexOf('a', 30) == -1",
        "'tacocat'.lastIndexOf('a', 30) == -1",
    ]);
}

#[test]
fn string_errors_as_cel_go() {
    fails(&[
        ("'tacocat'.charAt(30) == ''", "index out of range: 30"),
        (
            "'tacocat'.lastIndexOf('a', -1) == -1",
            "index out of range: -1",
        ),
        (
            "\"tacocat\".substring(40) == \"cat\"",
            "index out of range: 40",
        ),
        (
            "\"tacocat\".substring(-1) == \"cat\"",
            "index out of range: -1",
        ),
        (
            "\"tacocat\".substring(1, 50) == \"cat\"",
            "index out of range: 50",
        ),
        (
            "\"tacocat\".substring(49, 50) == \"cat\"",
            "index out of range: 49",
        ),
        (
            "\"tacocat\".substring(4, 3) == \"\"",
            "invalid substring range. start: 4, end: 3",
        ),
        ("42.charAt(2) == \"\"", "No such overload"),
        ("'hello'.charAt(true) == \"\"", "No such overload"),
        ("24.indexOf('2') == 0", "No such overload"),
        ("'hello'.indexOf(true) == 1", "No such overload"),
        ("'42'.indexOf('4', '0') == 0", "No such overload"),
        ("'42'.indexOf('4', 0, 1) == 0", "No such overload"),
        ("42.split(\"2\") == [\"4\"]", "No such overload"),
        ("\"42\".replace(2, 1) == \"41\"", "No such overload"),
        (
            "\"42\".replace(\"2\", \"1\", \"1\") == \"41\"",
            "No such overload",
        ),
        ("\"42\".split(2) == [\"4\"]", "No such overload"),
        ("'hello'.substring(1, 2, 3) == \"\"", "No such overload"),
        ("\"tacocat\".substring(true, 3) == \"\"", "No such overload"),
        ("[1, 2].join() == ''", "join: invalid input"),
    ]);
}

#[test]
fn encoders_as_cel_go() {
    holds(&[
        "base64.decode('aGVsbG8=') == b'hello'",
        "base64.decode('aGVsbG8') == b'hello'",
        "base64.encode(b'hello') == 'aGVsbG8='",
    ]);
    fails(&[
        ("base64.decode(b'aGVsbG8=') == b'hello'", "No such overload"),
        ("base64.encode('hello') == b'aGVsbG8='", "No such overload"),
    ]);
}

#[test]
fn sets_as_cel_go() {
    holds(&[
        "sets.contains([], [])",
        "sets.contains([1], [])",
        "sets.contains([1], [1])",
        "sets.contains([1], [1, 1])",
        "sets.contains([1, 1], [1])",
        "sets.contains([2, 1], [1])",
        "sets.contains([1, 2, 3, 4], [2, 3])",
        "!sets.contains([1], [2])",
        "!sets.contains([1], [1, 2])",
        "!sets.contains([1], [\"1\", 1])",
        "sets.equivalent([], [])",
        "sets.equivalent([1], [1])",
        "sets.equivalent([1], [1, 1])",
        "sets.equivalent([1, 1], [1])",
        "!sets.equivalent([2, 1], [1])",
        "!sets.equivalent([1], [1, 2])",
        "sets.intersects([1], [1])",
        "sets.intersects([1], [1, 1])",
        "sets.intersects([1, 1], [1])",
        "sets.intersects([2, 1], [1])",
        "sets.intersects([1], [1, 2])",
        "!sets.intersects([], [])",
        "!sets.intersects([1], [])",
        "!sets.intersects([1], [2])",
        // CEL's equality across numeric types.
        "sets.contains([1], [1.0, 1])",
        "sets.contains([1, 2], [2u, 2.0])",
        "sets.equivalent([1, 2, 3], [3u, 2.0, 1])",
        "!sets.contains([1], [1.1, 1u])",
    ]);
}

#[test]
fn the_standard_contains_still_works_beside_sets() {
    holds(&[
        "'tacocat'.contains('coc')",
        "[1, 2].contains(2)",
        "!{'a': 1}.contains('b')",
    ]);
}
