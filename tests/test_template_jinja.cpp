// The Jinja interpreter against jinja2: every expected output in kCases was produced by jinja2 3.1.6
// configured as transformers configures it (ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loopcontrols; tojson = json.dumps(ensure_ascii=False)). Then the sandbox limits and
// the errors, which must name the template line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "template/jinja.h"

namespace gerbil::jinja {
namespace {

struct Case {
  const char* source;
  const char* variables;  // JSON object
  const char* expected;
};

// clang-format off
const Case kCases[] = {
    // --- whitespace ---
    {R"J({% if true %}
  x
{% endif %}
)J",
     R"J({})J",
     R"J(  x
)J"},
    {R"J(a
  {% if true %}
  b
  {% endif %}
c)J",
     R"J({})J",
     R"J(a
  b
c)J"},
    {R"J(  {{ 1 }}  {% if 1 %}x{% endif %})J",
     R"J({})J",
     R"J(  1  x)J"},
    {R"J(a  {%- if true -%}  b  {%- endif -%}  c)J",
     R"J({})J",
     R"J(abc)J"},
    {R"J(a
{{- 'b' -}}
 c)J",
     R"J({})J",
     R"J(abc)J"},
    {R"J({% if true +%}
x{% endif %})J",
     R"J({})J",
     R"J(
x)J"},
    {R"J(a
  {%+ if true %}b{% endif %})J",
     R"J({})J",
     R"J(a
  b)J"},
    {R"J({# comment #}
x {#- trimmed -#} y)J",
     R"J({})J",
     R"J(xy)J"},
    {"a\r\nb\rc\n",
     R"J({})J",
     R"J(a
b
c)J"},
    {R"J(  {% for i in [1, 2] %}
  {{ i }}
  {% endfor %}
)J",
     R"J({})J",
     R"J(  1
  2
)J"},
    {R"J(a
  {% raw %}
  {{ x }} {% if %}
  {% endraw %}
b)J",
     R"J({})J",
     R"J(a

  {{ x }} {% if %}
b)J"},
    // --- literals ---
    {R"J({{ 'a\'b\n\x41\u00e9\t' }}|{{ "q\"" }}|{{ 'x' 'y' }})J",
     R"J({})J",
     "a'b\nAé\t|q\"|xy"},
    {R"J({{ 42 }}|{{ 1_000 }}|{{ 0x1f }}|{{ 1.5 }}|{{ 1e3 }}|{{ 2.5e-5 }}|{{ 1e16 }}|{{ 1.0 }})J",
     R"J({})J",
     R"J(42|1000|31|1.5|1000.0|2.5e-05|1e+16|1.0)J"},
    {R"J({{ true }}|{{ True }}|{{ false }}|{{ none }}|{{ None }}|{{ [1, 'a', none, true, 0.5] }}|{{ {'k': [1]} }}|{{ (1, 2) }}|{{ (1,) }})J",
     R"J({})J",
     R"J(True|True|False|None|None|[1, 'a', None, True, 0.5]|{'k': [1]}|(1, 2)|(1,))J"},
    {R"J({{ ["it's", 'say "hi"', 'a\nb'] }})J",
     R"J({})J",
     R"J(["it's", 'say "hi"', 'a\nb'])J"},
    // --- access ---
    {R"J({{ d.a }}|{{ d['a'] }}|{{ d.b[1] }}|{{ d.b.0 }}|{{ l[-1] }}|{{ l[10] }}|{{ d.missing }}|{{ s[1] }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(1|1|2|1|2|||é)J"},
    {R"J({{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ s[::-1] }}|{{ s[2:4] }}|{{ l[5:] }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J([1, 2]|[3, 1]|[2, 1, 3]|[3, 2]|dlröw olléh|ll|[])J"},
    {R"J({{ d.items is defined }}|{{ d['items'] is defined }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}|{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 0) }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(True|True|['a', 'b']|[1, [1, 2]]|[('a', 1), ('b', [1, 2])]|1|None|0)J"},
    // --- operators ---
    {R"J({{ 7 + 2 }}|{{ 7 - 2 }}|{{ 7 * 2 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ 7 % 2 }}|{{ 7 ** 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 4 / 2 }}|{{ 2 ** -1 }})J",
     R"J({})J",
     R"J(9|5|14|3.5|3|1|49|-4|2|2.0|0.5)J"},
    {R"J({{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ true + 1 }}|{{ 0.1 + 0.2 }})J",
     R"J({})J",
     R"J(64|4|7|9|3.0|0.5|2|0.30000000000000004)J"},
    {R"J({{ 'a' ~ 1 ~ none ~ true }}|{{ 'a' + 'b' }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ [0] * 3 }})J",
     R"J({})J",
     R"J(a1NoneTrue|ab|ababab|[1, 2]|[0, 0, 0])J"},
    {R"J({{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 2 >= 2 }})J",
     R"J({})J",
     R"J(True|False|True|True|True|True|True)J"},
    {R"J({{ 2 in l }}|{{ 5 not in l }}|{{ 'ell' in 'hello' }}|{{ 'a' in d }}|{{ 'z' in d }}|{{ not 2 in l }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(True|True|True|True|False|False)J"},
    {R"J({{ true and 'x' }}|{{ 0 and 'x' }}|{{ 0 or 'y' }}|{{ none or [] }}|{{ not none }}|{{ 'a' if l else 'b' }}|{{ 'a' if none else 'b' if 0 else 'c' }}|{{ 'a' if false }}|)J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(x|0|y|[]|True|a|c||)J"},
    {R"J({{ '%s-%d|%5.2f|%-4s|%03d|%x|%%' % ('a', 3, 3.14159, 'b', 7, 255) }}|{{ '%s'|format('f') }})J",
     R"J({})J",
     R"J(a-3| 3.14|b   |007|ff|%|f)J"},
    // --- tests ---
    {R"J({{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 'a' is string }}|{{ 3 is number }}|{{ 3.5 is number }}|{{ 3 is integer }}|{{ true is integer }}|{{ 3.0 is float }})J",
     R"J({})J",
     R"J(False|True|True|True|True|True|True|False|True)J"},
    {R"J({{ d is mapping }}|{{ l is mapping }}|{{ l is iterable }}|{{ 's' is iterable }}|{{ 3 is iterable }}|{{ l is sequence }}|{{ true is boolean }}|{{ 1 is boolean }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(True|False|True|True|False|True|True|False)J"},
    {R"J({{ true is true }}|{{ 1 is true }}|{{ false is false }}|{{ 4 is even }}|{{ 3 is odd }}|{{ 9 is divisibleby 3 }}|{{ 2 is in l }}|{{ 2 is equalto 2 }}|{{ 2 is eq 3 }}|{{ 3 is not none }}|{{ 'ab' is lower }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(True|False|True|True|True|True|True|True|False|True|True)J"},
    // --- filters ---
    {R"J([{{ '  a b \n'|trim }}]|{{ 'xxaxx'|trim('x') }}|{{ l|length }}|{{ s|length }}|{{ d|count }}|{{ x|length }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J([a b]|a|3|11|2|0)J"},
    {R"J({{ 'hello WORLD'|upper }}|{{ 'Hello'|lower }}|{{ 'hello WORLD'|capitalize }}|{{ 'a-b c(d'|title }}|{{ s|title }}|{{ s|upper }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(HELLO WORLD|hello|Hello world|A-B C(D|Héllo Wörld|HÉLLO WÖRLD)J"},
    {R"J({{ 'aXbX'|replace('X', '-') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ l|first }}|{{ l|last }}|{{ 'abc'|list }}|{{ 3|string ~ '!' }}|{{ l|reverse|list }}|{{ 'abc'|reverse }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(a-b-|bba|3|2|['a', 'b', 'c']|3!|[2, 1, 3]|cba)J"},
    {R"J({{ '42'|int }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 'ff'|int(base=16) }}|{{ 3.9|int }}|{{ '2.5'|float }}|{{ 'x'|float }}|{{ 3|float }})J",
     R"J({})J",
     R"J(42|4|0|7|255|3|2.5|0.0|3.0)J"},
    {R"J({{ -3|abs }}|{{ (-3)|abs }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.567|round(2) }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(0, 'floor') }}|{{ 7|round }})J",
     R"J({})J",
     R"J(3|3|2.0|4.0|2.57|3.0|2.0|7)J"},
    {R"J({{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|d('d') }}|{{ 0|d('d', boolean=true) }})J",
     R"J({})J",
     R"J(d||d|None|d)J"},
    {R"J({{ l|join }}|{{ l|join(', ') }}|{{ ms|join('/', attribute='role') }}|{{ d|items|list }}|{{ l|sort }}|{{ l|sort(reverse=true) }}|{{ ['b', 'A', 'a']|sort }}|{{ [1, 2, 1]|unique|list }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(312|3, 1, 2|user/assistant|[('a', 1), ('b', [1, 2])]|[1, 2, 3]|[3, 2, 1]|['A', 'a', 'b']|[1, 2])J"},
    {R"J({{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|first }}|{{ ms|map(attribute='name', default='?')|list }}|{{ [1, 2, 3]|select('odd')|list }}|{{ [1, 2, 3]|reject('gt', 1)|list }}|{{ ['a']|map('upper')|list }}|{{ none|selectattr('x')|list }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(['hi']|assistant|['?', '?']|[1, 3]|[1]|['A']|[])J"},
    {R"J({{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(1, blank=true) }}|{{ '<a & "b">'|e }}|{{ '<b>'|safe }}|{{ [3, 9, 4]|max }}|{{ [3, 9, 4]|min }}|{{ [3, 9, 4]|sum }})J",
     R"J({})J",
     R"J(a
    b

    c|  a
  b|a
 
 b|&lt;a &amp; &#34;b&#34;&gt;|<b>|9|3|16)J"},
    // --- tojson ---
    {R"J({{ d|tojson }}|{{ 'é\n\u0001"'|tojson }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ [1.0, 1e100, none, true]|tojson }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J({"a": 1, "b": [1, 2]}|"é\n\u0001\""|"\u00e9\ud83d\ude00"|[1.0, 1e+100, null, true]|{"a": 2, "b": 1})J"},
    {R"J({{ d|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ {'a': 1}|tojson(separators=(',', ':')) }}|{{ {'a': [1]}|tojson(indent='\t') }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ]\n}|[]|{\"a\":1}|{\n\t\"a\": [\n\t\t1\n\t]\n}"},
    // --- methods ---
    {R"J({{ 'abc'.startswith('a') }}|{{ 'abc'.startswith(('x', 'ab')) }}|{{ 'abc'.endswith('bc') }}|{{ ' x '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ '\n\nhi\n'.strip('\n') }})J",
     R"J({})J",
     R"J(True|True|True|x|axx|xxa|hi)J"},
    {R"J({{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a</think>b</think>c'.split('</think>')[-1] }})J",
     R"J({})J",
     R"J(['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|c)J"},
    {R"J({{ 'aXa'.replace('a', 'b') }}|{{ 'Ab'.upper() }}|{{ 'Ab'.lower() }}|{{ 'hello world'.title() }}|{{ 'abcabc'.find('c') }}|{{ 'abc'.find('z') }}|{{ 'abcabc'.count('bc') }}|{{ '{} and {x}'.format(1, x=2) }}|{{ ', '.join(['a', 'b']) }})J",
     R"J({})J",
     R"J(bXb|AB|ab|Hello World|2|-1|2|1 and 2|a, b)J"},
    // --- statements ---
    {R"J({% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(10TrueFalse331;21FalseFalse3232;32FalseTrue311;)J"},
    {R"J({% for i in range(6) if i is odd %}{{ i }}/{{ loop.length }} {% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in l if i > 5 %}x{% else %}none{% endfor %})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(1/3 3/3 5/3 |empty|none)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'ab' %}{{ c }}.{% endfor %}|{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(a=1;b=[1, 2];|ab|a.b.|37)J"},
    {R"J({% for i in l %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}|{% for i in l %}{% if i == 1 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in l %}{{ loop.cycle('a', 'b') }}{% endfor %})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(32|3|aba)J"},
    {R"J({% if 0 %}a{% elif none %}b{% elif 'x' %}c{% else %}d{% endif %}|{% if 0 %}a{% else %}e{% endif %})J",
     R"J({})J",
     R"J(c|e)J"},
    {R"J({% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }},{% endfor %}{{ x }}|{% if true %}{% set y = 3 %}{% endif %}{{ y }})J",
     R"J({})J",
     R"J(110,120,1|3)J"},
    {R"J({% set ns = namespace(total=0, seen=false) %}{% for i in l %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}{{ ns.seen }}|{% set a, b = [1, 2] %}{{ b }}{{ a }}|{% set t %}[{{ 1 + 1 }}]{% endset %}{{ t }})J",
     R"J({"l": [3, 1, 2], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld", "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J",
     R"J(6False|21|[2])J"},
    {R"J({% macro tag(name, value='v') %}<{{ name }}={{ value }}>{% endmacro %}{{ tag('a') }}{{ tag('b', 'w') }}{{ tag(value=1, name='c') }}|{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, k=2) }})J",
     R"J({})J",
     R"J(<a=v><b=w><c=1>|(1,){'k': 2})J"},
    {R"J({% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}|{% macro wrap() %}({{ caller() }}){% endmacro %}{% call wrap() %}in{% endcall %})J",
     R"J({})J",
     R"J(321|(in))J"},
    {R"J({% filter upper %}abc{{ 'd' }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|{% generation %}kept{% endgeneration %})J",
     R"J({})J",
     R"J(ABCD|3|kept)J"},
    // --- globals ---
    {R"J({{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(3, 0, -1)|list }}|{{ dict(a=1, b=2) }}|{{ namespace(a=1).a }}|{{ strftime_now('%Y')|length }})J",
     R"J({})J",
     R"J([0, 1, 2]|[1, 3, 5]|[3, 2, 1]|{'a': 1, 'b': 2}|1|4)J"},
    // --- undefined ---
    {R"J({{ x }}|{{ x|length }}|{{ x|default('d') }}|{% for i in x %}no{% else %}empty{% endfor %}|{{ x == y }}|{{ not x }}|{{ x ~ 'a' }}|{{ 'a' in x }}|{{ x|trim }}|{{ x|list }})J",
     R"J({})J",
     R"J(|0|d|empty|True|True|a|False||[])J"},
};
// clang-format on

class Jinja2Reference : public ::testing::TestWithParam<Case> {};

TEST_P(Jinja2Reference, RendersAsJinja2) {
  const Case& c = GetParam();
  Template tpl(c.source);
  EXPECT_EQ(tpl.render(nlohmann::ordered_json::parse(c.variables)), c.expected) << "template: " << c.source;
}

INSTANTIATE_TEST_SUITE_P(Features, Jinja2Reference, ::testing::ValuesIn(kCases));

// Renders and returns the error message, failing the test if rendering succeeds.
std::string render_error(const std::string& source, const Limits& limits = {},
                         const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  try {
    Template(source, limits).render(variables);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error rendering: " << source;
  return "";
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  std::string message = render_error("line 1\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  EXPECT_NE(message.find("syntax error at line 3"), std::string::npos) << message;
  message = render_error("a\n{% for m in messages %}\n{{ m }}\n");
  EXPECT_NE(message.find("the 'for' block from line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("endfor"), std::string::npos) << message;
  message = render_error("\n\n{{ x | no_such_filter }}");
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("no filter named 'no_such_filter'"), std::string::npos) << message;
  EXPECT_NE(render_error("{% endif %}").find("unknown tag 'endif'"), std::string::npos);
  EXPECT_NE(render_error("x\n{# open comment").find("line 2: missing end of comment"), std::string::npos);
  EXPECT_NE(render_error("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(render_error("{{ (1 ]}}").find("unexpected ']'"), std::string::npos);
  EXPECT_NE(render_error("{% include 'other.jinja' %}").find("'include' tag is not supported"),
            std::string::npos);
  EXPECT_NE(render_error("{% break %}").find("'break' outside of a loop"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionGivesMessageAndLine) {
  std::string message =
      render_error("a\n{% if true %}\n  {{ raise_exception('bad ' ~ 'roles') }}\n{% endif %}");
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("bad roles"), std::string::npos) << message;
}

TEST(JinjaErrors, RuntimeErrorsNameTheLineAndCulprit) {
  EXPECT_NE(render_error("{{ 1 }}\n{{ none + 1 }}")
                .find("line 2: unsupported operand type(s) for +: 'NoneType' and 'int'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ foo.bar }}").find("'foo' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ foo() }}").find("'foo' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ foo + 1 }}").find("'foo' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ {'a': 1}.b.c }}").find("'dict object' has no attribute 'b'"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' + 1 }}").find("can only concatenate str (not \"int\") to str"),
            std::string::npos);
  EXPECT_NE(render_error("{% for x in none %}{% endfor %}").find("'NoneType' object is not iterable"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ x|tojson }}").find("not JSON serializable"), std::string::npos);
  EXPECT_NE(
      render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1 argument"),
      std::string::npos);
  EXPECT_NE(render_error("{% set x = 1 %}{% set x.y = 2 %}").find("non-namespace"), std::string::npos);
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
}

TEST(JinjaSandbox, RefusesMutation) {
  EXPECT_NE(
      render_error("{{ [1].append(2) }}").find("access to attribute 'append' of 'list' object is unsafe"),
      std::string::npos);
  EXPECT_NE(render_error("{{ {'a': 1}.update({}) }}").find("unsafe"), std::string::npos);
}

TEST(JinjaSandbox, LimitsLoopIterations) {
  Limits limits;
  limits.max_iterations = 1000;
  const char* nested = "{% for i in range(40) %}{% for j in range(40) %}{% endfor %}{% endfor %}";
  EXPECT_NE(render_error(nested, limits).find("limit of 1000 loop iterations"), std::string::npos);
  limits.max_iterations = 40 + 40 * 40;
  EXPECT_EQ(Template(nested, limits).render(nlohmann::ordered_json::object()), "");
  EXPECT_EQ(Limits().max_iterations, 1000000u);
  EXPECT_NE(render_error("{{ range(200000)|length }}").find("range too big"), std::string::npos);
}

TEST(JinjaSandbox, LimitsOutputSize) {
  Limits limits;
  limits.max_output_bytes = 1000;
  std::string message = render_error("\n{% for i in range(100) %}0123456789abcdef{% endfor %}", limits);
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("limit of 1000 bytes"), std::string::npos) << message;
  // Strings and lists built on the way are bounded too, before they use the memory.
  EXPECT_NE(render_error("{{ 'x' * 100000000000 }}").find("exceeded the sandbox limit"), std::string::npos);
  EXPECT_NE(render_error("{% set s = 'x' * 1000 %}{{ s * 100000 }}").find("exceeded the sandbox limit"),
            std::string::npos);
  EXPECT_NE(render_error("{{ [1, 2, 3] * 9223372036854775807 }}").find("exceeded the sandbox limit"),
            std::string::npos);
  EXPECT_EQ(Template("[{{ '' * 9223372036854775807 }}]").render(nlohmann::ordered_json::object()), "[]");
}

TEST(JinjaSandbox, LimitsWork) {
  // Few iterations, each copying a megabyte: bounded by the bytes built, not the loop count.
  std::string message = render_error(
      "{% set s = 'x' * 1000000 %}\n{% for i in range(100000) %}{% set t = s ~ i %}{% endfor %}");
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("built more than the sandbox limit of 1073741824 bytes"), std::string::npos)
      << message;
}

TEST(JinjaSandbox, LimitsRecursion) {
  std::string message = render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}\n{{ r(0) }}");
  EXPECT_NE(message.find("macro calls nest deeper than the sandbox limit of 64"), std::string::npos)
      << message;
  std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(render_error("{{ " + deep + " }}").find("nests too deeply"), std::string::npos);
}

TEST(JinjaValue, JsonRoundTripKeepsKeyOrder) {
  auto json =
      nlohmann::ordered_json::parse(R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": {}, "b": []}})");
  Value value = Value::from_json(json);
  EXPECT_EQ(value.to_json(), json);
  EXPECT_EQ(value.to_json().dump(), json.dump());
  EXPECT_EQ(value.repr(), "{'z': 1, 'a': [True, None, 2.5, 's'], 'm': {'y': {}, 'b': []}}");
  EXPECT_THROW(Value::undefined("'x' is undefined").to_json(), Error);
}

TEST(JinjaValue, FloatsPrintAsPython) {
  const std::pair<double, const char*> cases[] = {{1.0, "1.0"},
                                                  {0.1, "0.1"},
                                                  {1e16, "1e+16"},
                                                  {1e15, "1000000000000000.0"},
                                                  {1.5e-5, "1.5e-05"},
                                                  {0.0001, "0.0001"},
                                                  {-0.0, "-0.0"},
                                                  {123456789.125, "123456789.125"},
                                                  {1.0 / 3, "0.3333333333333333"},
                                                  {2.5e300, "2.5e+300"}};
  for (auto [x, text] : cases) EXPECT_EQ(Value(x).str(), text);
}

}  // namespace
}  // namespace gerbil::jinja
