#!/usr/bin/env python3
"""Random Jinja templates over the constructs real chat templates use, for tools/chat-goldens/crosscheck
(ours against Python Jinja2 as transformers sets it): gen-random.py SEED N > jobs.json"""
import json, random, sys
R = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 500
CTX = {"x": 5, "y": -3, "f": 2.5, "z": 0, "s": "Hello World", "u": "héllo wörld ß ǅ İ", "e": "", "sp": "  a b\n",
       "l": [3, 1, 2], "ls": ["b", "A", "c", "a"], "d": {"b": 1, "a": [1, 2], "c": None}, "n": None, "t": True, "fa": False,
       "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <|x|>"},
                    {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": "é"}}}]},
                    {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}],
       "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]}
VARS = ["x", "y", "f", "z", "s", "u", "e", "sp", "l", "ls", "d", "n", "t", "fa", "messages", "tools", "undef"]
STRS = ["'a'", "'abc'", "''", "' x '", "'é'", "'<b>'", "'a,b'", "'\\n'", "'%s'", "'{}'", "'Hello'", "'o'", "'l'", "\"q'\""]
FILTERS0 = ["length", "trim", "upper", "lower", "title", "capitalize", "first", "last", "list", "string", "tojson", "int", "float",
            "abs", "sort", "unique", "reverse", "join", "sum", "min", "max", "count", "wordcount", "items", "dictsort", "e", "safe",
            "round", "center", "indent", "striptags", "default", "batch(2)", "slice(2)", "map('upper')", "select", "reject",
            "selectattr('role')", "map(attribute='role')", "join(', ')", "default('D')", "default('D', true)", "replace('l','L')",
            "truncate(5)", "tojson(indent=2)", "format(1)", "attr('role')", "sort(reverse=true)", "sort(attribute='role')",
            "groupby('role')", "xmlattr", "urlencode", "wordwrap(5)", "filesizeformat", "pprint", "random", "string | length",
            "select('odd')", "reject('none')", "rejectattr('content', 'string')", "map('int')", "unique(attribute='role')"]
TESTS = ["ge(3)", "defined", "undefined", "none", "string", "number", "integer", "float", "iterable", "mapping", "sequence", "true", "false",
         "odd", "even", "boolean", "callable", "lower", "upper", "divisibleby(2)", "eq(5)", "in([1,2,3])", "sameas(none)", 
         "equalto('user')", "escaped"]
METHODS = ["upper()", "lower()", "strip()", "split()", "split(',')", "startswith('H')", "endswith('d')", "replace('o','0')",
           "title()", "capitalize()", "lstrip()", "rstrip('d')", "find('o')", "count('l')", "items()", "keys()", "values()",
           "get('a')", "get('zz', 1)", "isdigit()", "isalpha()", "format(1, 2)", "join(['x','y'])", "splitlines()", "swapcase()",
           "zfill(6)", "center(9, '*')", "partition(' ')", "index('o')", "append(1)", "pop()", "copy()", "strip('H')", "casefold()"]
def lit(depth):
    c = R.randrange(9)
    if c == 0: return str(R.choice([0, 1, 2, -1, 10, 255, 3]))
    if c == 1: return R.choice(["1.5", "0.1", "2.0", "1e3", "-0.5", "3.14159"])
    if c == 2 or c == 3: return R.choice(STRS)
    if c == 4: return R.choice(["none", "true", "false", "None", "True", "False"])
    if c == 5 and depth < 3: return "[" + ", ".join(expr(depth + 1) for _ in range(R.randrange(4))) + "]"
    if c == 6 and depth < 3: return "{" + ", ".join(R.choice(STRS) + ": " + expr(depth + 1) for _ in range(R.randrange(3))) + "}"
    if c == 7 and depth < 3: return "(" + ", ".join(expr(depth + 1) for _ in range(R.randrange(1, 3))) + ",)"
    return R.choice(VARS)
def expr(depth=0):
    if depth > 3: return lit(depth)
    c = R.randrange(16)
    a = lambda: (lambda e: e if R.random() < .3 or e.replace('_','').isalnum() else '(' + e + ')')(expr(depth + 1))
    if c <= 3: return lit(depth)
    if c == 4: return f"{a()} {R.choice(['+','-','*','/','//','%','~','**'])} {a()}"
    if c == 5: return f"{a()} {R.choice(['==','!=','<','>','<=','>=','in','not in'])} {a()}"
    if c == 6: return f"{a()} {R.choice(['and','or'])} {a()}"
    if c == 7: return f"{a()} | {R.choice(FILTERS0)}"
    if c == 8: return f"{a()} is {R.choice(['', 'not '])}{R.choice(TESTS)}"
    if c == 9: return f"{R.choice(VARS)}.{R.choice(METHODS)}"
    if c == 10: return a() + "[" + R.choice(['0','1','-1','::-1','1:','-2:',':2','::2','"a"','"role"','x']) + "]"
    if c == 11: return f"({a()} if {a()} else {a()})"
    if c == 12: return f"not {a()}"
    if c == 13: return f"({a()})"
    if c == 14: return R.choice(['messages[0]','messages[-1]','d','messages[2].tool_calls[0].function', 'tools[0].function']) + "." + R.choice(['role','content','a','name','arguments','parameters','get("role")','items()','zz'])
    return f"{R.choice(['range','dict','namespace','lipsum','cycler','joiner'])}({R.choice(['3','1, 5, 2','a=1','','-2'])})"
def ws(tag):
    return R.choice(["", "", "-", "+"]) if tag else ""
def stmt(depth=0):
    c = R.randrange(12 if depth < 3 else 3)
    o = lambda: "{%" + ws(1) + " "
    cl = lambda: " " + ws(1) + "%}"
    if c == 0: return "{{" + R.choice(["", "-"]) + " " + expr() + " " + R.choice(["", "-"]) + "}}"
    if c == 1: return R.choice(["a", " ", "\n", "  x\n", "\n  ", "\t", "é"])
    if c == 2: return "{# c #}" + R.choice(["", "\n"])
    body = lambda: "".join(stmt(depth + 1) for _ in range(R.randrange(1, 3)))
    if c in (3, 4): return f"{o()}if {expr()}{cl()}{body()}" + (f"{o()}elif {expr()}{cl()}{body()}" if R.random() < .3 else "") + (f"{o()}else{cl()}{body()}" if R.random() < .5 else "") + f"{o()}endif{cl()}" + R.choice(["", "\n"])
    if c in (5, 6):
        it = R.choice(["l", "ls", "messages", "d", "d.items()", "s", "range(3)", "messages[::-1]", "l | sort", "[]", "tools", "x", "n", "undef"])
        var = "k, v" if "items" in it else "m"
        filt = f" if {expr()}" if R.random() < .2 else ""
        inner = body() + R.choice(["", "{{ loop.index }}", "{{ loop.index0 }}{{ loop.first }}{{ loop.last }}", "{{ loop.length }}{{ loop.revindex }}", "{{ loop.previtem }}{{ loop.nextitem }}", "{{ loop.cycle('a','b') }}", "{% if loop.index > 1 %}{% break %}{% endif %}", "{% continue %}", "{{ m }}", "{{ loop.changed(m) }}", "{{ loop.depth }}"])
        return f"{o()}for {var} in {it}{filt}{cl()}{inner}" + (f"{o()}else{cl()}E" if R.random() < .2 else "") + f"{o()}endfor{cl()}" + R.choice(["", "\n"])
    if c == 7: return f"{o()}set {R.choice(['x','s','q','l','m'])} = {expr()}{cl()}"
    if c == 8: return f"{o()}set ns = namespace(a={expr()}){cl()}{o()}set ns.a = {expr()}{cl()}{{{{ ns.a }}}}"
    if c == 9: return f"{o()}macro mm(p, q=2){cl()}{body()}{{{{ p }}}}{{{{ q }}}}{o()}endmacro{cl()}{{{{ mm({expr()}) }}}}"
    if c == 10: return f"{o()}set blk{cl()}{body()}{o()}endset{cl()}{{{{ blk }}}}"
    return f"{o()}filter {R.choice(['upper','trim','lower','indent(2)'])}{cl()}{body()}{o()}endfilter{cl()}"
jobs = []
for _ in range(N):
    t = "".join(stmt() for _ in range(R.randrange(1, 3)))
    jobs.append({"template": t, "context": CTX})
json.dump(jobs, sys.stdout, ensure_ascii=False)
