// ==== Chat templates, part 3: the renderer ====
// Walks the syntax tree with Jinja2's semantics (scopes: a for loop or macro call gets its own
// scope, `if` does not; `set` writes to the innermost scope; namespaces are shared objects).
// Errors are values: the first failure stops the render and names the line:column.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct JArgs {
  std::vector<JValue> pos;
  std::vector<std::pair<std::string, JValue>> kw;
};

struct JRenderOptions {
  uint64_t max_steps = LLMINFER_JINJA_MAX_STEPS;
  size_t max_string = LLMINFER_JINJA_MAX_STRING;
  size_t max_stack = LLMINFER_JINJA_MAX_STACK;  // stack bytes the render may use (nested evaluation)
  std::function<std::tm()> clock;               // strftime_now(); the local time when empty
  // Polled while rendering (every few thousand steps): when it becomes true the render stops
  // with an error ("rendering cancelled"). Not owned.
  const std::atomic<bool>* cancel = nullptr;
};

// The builtins (filters, tests, str methods, globals) are rows of sorted tables, {name, handler},
// found by binary search; that a table is sorted is checked when it is compiled.
template <class Def, size_t N>
constexpr bool jtable_sorted(const Def (&t)[N]) {
  for (size_t k = 1; k < N; k++)
    if (!(t[k - 1].name < t[k].name)) return false;
  return true;
}
template <class Def, size_t N>
const Def* jtable_find(const Def (&t)[N], std::string_view name) {
  const Def* it = std::lower_bound(t, t + N, name, [](const Def& d, std::string_view n) { return d.name < n; });
  return it != t + N && it->name == name ? it : nullptr;
}

class JRender {
  using SP = std::shared_ptr<JScope>;

 public:
  JRender(const JProgram& prog, const JRenderOptions& opt) : prog_(prog), opt_(opt) {}
  ~JRender() {
    // namespaces are the only mutable objects, so every reference cycle goes through one
    for (auto& w : namespaces_)
      if (auto p = w.lock()) p->items.clear();
  }

  bool run(const SP& globals, PText& out) {
    stack_base_ = jstack_here();
    auto top = std::make_shared<JScope>();
    top->parent = globals;
    predeclare(prog_.root_undef, *top);
    exec(prog_.root, top, out);
    // namespaces are cleared before the scopes go (a chain of namespaces holding each other
    // would otherwise be destroyed recursively, one level per link)
    for (auto& w : namespaces_)
      if (auto p = w.lock()) p->items.clear();
    return !failed_;
  }

  std::string error;
  bool raised = false;     // the template called raise_exception()
  bool cancelled = false;  // JRenderOptions::cancel was set
  uint64_t steps_used() const { return steps_; }

  // ---- value helpers usable before a render (building the context) ----
  JValue make_ns() {
    JValue v;
    v.t = JValue::T::ns;
    v.m = std::make_shared<JDict>();
    namespaces_.push_back(v.m);
    return v;
  }

 private:
  // Names a frame assigns before reading them start undefined (JParser::scan_frame).
  static void predeclare(const std::vector<std::string>& names, JScope& sc) {
    for (const auto& name : names) sc.set(name, JValue::undefined(strf("'%s' is undefined", name.c_str())));
  }

  // ================================================================ errors and limits
  bool fail(std::string msg) {
    if (!failed_) {
      failed_ = true;
      error = strf("chat template %s: %s", prog_.where(pos_).c_str(), msg.c_str());
    }
    return false;
  }
  JValue failv(std::string msg) {
    fail(std::move(msg));
    return JValue();
  }
  bool charge(uint64_t n = 1) {
    steps_ += n;
    if (opt_.cancel && steps_ >= next_poll_) {  // about every 2 ms
      next_poll_ = steps_ + 4096;
      if (opt_.cancel->load(std::memory_order_relaxed)) {
        cancelled = true;
        return fail("rendering cancelled");
      }
    }
    if (steps_ > opt_.max_steps)
      return fail(strf("the template ran more than %llu steps (a loop that does not end?)",
                       static_cast<unsigned long long>(opt_.max_steps)));
    return true;
  }
  // Text built costs steps too (1 per 64 bytes), so memory churn is bounded as well as time.
  bool charge_str(size_t bytes) { return charge(bytes / 64 + 1); }
  // Text or items an operation may scan cost steps too: tests, filters and methods (which decode
  // code points, copy, case-map) 1 per 8 bytes of each string operand, so a test on a 16 MB string
  // is 2 million steps, not 1; comparisons and searches (memcmp speed) 1 per 64 bytes. The budget
  // thus bounds the time whatever the operands' sizes.
  bool charge_scan(const JValue& v) {
    switch (v.t) {
      case JValue::T::string: return charge(v.s->s.size() / 8);
      case JValue::T::list: return charge(v.l->items.size() / 8);
      case JValue::T::dict:
      case JValue::T::ns: return v.m ? charge(v.m->items.size() / 8) : true;
      default: return true;
    }
  }
  bool charge_scan(const JValue& v, const JArgs& args) {
    if (!charge_scan(v)) return false;
    for (const JValue& x : args.pos)
      if (!charge_scan(x)) return false;
    for (const auto& kv : args.kw)
      if (!charge_scan(kv.second)) return false;
    return true;
  }
  // A list of n items is about to be built: each item costs 4 steps (values are ~100 bytes).
  bool charge_list(uint64_t n) {
    if (n > LLMINFER_JINJA_MAX_LIST)
      return fail(strf("a list of %llu items is longer than the limit of %u", static_cast<unsigned long long>(n),
                       static_cast<unsigned>(LLMINFER_JINJA_MAX_LIST)));
    return charge(4 * n);
  }
  bool check_len(size_t n) {
    if (n > opt_.max_string)
      return fail(strf("a string of %zu bytes is longer than the limit of %zu", n, opt_.max_string));
    return true;
  }
  struct DepthGuard {
    JRender& r;
    bool ok;
    explicit DepthGuard(JRender& rr) : r(rr), ok(++rr.depth_ <= LLMINFER_JINJA_MAX_EVAL_DEPTH) {
      if (!ok) {
        r.fail(strf("evaluation nested more than %d levels deep", LLMINFER_JINJA_MAX_EVAL_DEPTH));
      } else if (jstack_used(r.stack_base_) > r.opt_.max_stack) {
        ok = false;
        r.fail(strf("evaluation nested too deeply (more than %zu KB of stack; macro calls in flight: %d)",
                    r.opt_.max_stack >> 10, r.call_depth_));
      }
    }
    ~DepthGuard() { --r.depth_; }
  };
  // The error of using an undefined value.
  bool fail_undef(const JValue& v) {
    if (v.unsafe) return fail("security error: " + v.s->s);
    return fail(v.s ? v.s->s : std::string("undefined value"));
  }
  static JValue undef_attr(const JValue& obj, std::string_view name) {
    return JValue::undefined(
        strf("'%s object' has no attribute '%.*s'", jv_type(obj), static_cast<int>(name.size()), name.data()));
  }
  static JValue unsafe_attr(const JValue& obj, std::string_view name) {
    JValue u = JValue::undefined(strf("access to attribute '%.*s' of '%s' object is unsafe.",
                                      static_cast<int>(name.size()), name.data(), jv_type(obj)));
    u.unsafe = true;
    return u;
  }

  // ================================================================ statements
  bool exec(const std::vector<JNode*>& body, const SP& sc, PText& out) {
    for (const JNode* n : body) {
      if (failed_) return false;
      if (!exec_one(n, sc, out)) return false;
      if (flow_ != Flow::normal) return true;
    }
    return !failed_;
  }

  bool emit(PText& out, std::string_view s, bool content = false) {
    if (!check_len(out.s.size() + s.size()) || !charge_str(s.size())) return false;
    out.add(s, content);
    return true;
  }
  bool emit(PText& out, const PText& s) {
    if (!check_len(out.s.size() + s.s.size()) || !charge_str(s.s.size())) return false;
    out.add(s);
    return true;
  }

  bool exec_one(const JNode* n, const SP& sc, PText& out) {
    DepthGuard g(*this);
    if (!g.ok) return false;
    pos_ = n->pos;
    if (!charge()) return false;
    switch (n->k) {
      case NK::output: return emit(out, n->str);
      case NK::print: {
        // a wholly constant {{ expression }} is printed as Jinja2 computes it when compiling,
        // even when its value is not a plain value (see eval_folded)
        print_root_ = n->a;
        JValue v = eval(n->a, sc);
        print_root_ = nullptr;
        if (failed_) return false;
        if (v.t == JValue::T::string) return emit(out, *v.s);
        PText t;
        if (!to_str(v, t)) return false;
        return emit(out, t);
      }
      case NK::if_: {
        JValue c = eval(n->a, sc);
        if (failed_) return false;
        return exec(jv_truthy(c) ? n->body : n->orelse, sc, out);
      }
      case NK::for_: return exec_for(n, sc, out);
      case NK::set: {
        JValue v = eval(n->b, sc);
        if (failed_) return false;
        return assign(n->a, std::move(v), sc);
      }
      case NK::set_block: {
        PText buf;
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        predeclare(n->undef_names, *inner);
        if (!exec(n->body, inner, buf)) return false;
        JValue v = JValue::str(std::move(buf));
        if (n->b) {
          v = eval_filter(n->b, sc, &v);
          if (failed_) return false;
        }
        return assign(n->a, std::move(v), sc);
      }
      case NK::macro: {
        JFunc f;
        f.kind = FnKind::macro;
        f.name = n->str;
        f.node = n;
        f.closure = sc;
        sc->set(n->str, jv_func(std::move(f)));
        return true;
      }
      case NK::call_block: {
        JFunc f;
        f.kind = FnKind::caller;
        f.name = "caller";
        f.node = n;
        f.closure = sc;
        JValue caller = jv_func(std::move(f));
        JValue r = eval_call(n->a, sc, &caller);
        if (failed_) return false;
        PText t;
        if (!to_str(r, t)) return false;
        return emit(out, t);
      }
      case NK::filter_block: {
        PText buf;
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        predeclare(n->undef_names, *inner);
        if (!exec(n->body, inner, buf)) return false;
        JValue v = JValue::str(std::move(buf));
        JValue r = eval_filter(n->a, sc, &v);
        if (failed_) return false;
        PText t;
        if (!to_str(r, t)) return false;
        return emit(out, t);
      }
      case NK::break_: flow_ = Flow::brk; return true;
      case NK::continue_: flow_ = Flow::cont; return true;
      case NK::scope: {
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        for (size_t k = 0; k < n->list.size(); k++) {
          JValue v = eval(n->list[k], sc);
          if (failed_) return false;
          if (!assign(n->kw[k], std::move(v), inner)) return false;
        }
        predeclare(n->undef_names, *inner);
        return exec(n->body, inner, out);
      }
      default: return fail("internal error: an expression where a statement was expected");
    }
  }

  // Each iteration runs in a fresh scope under the enclosing one (Jinja2 reloads outer names at
  // the start of every iteration, so `set` inside a loop never carries over to the next one).
  bool exec_for(const JNode* n, const SP& sc, PText& out) {
    if (n->flag) return fail("unsupported construct: recursive for loops");
    JValue it = eval(n->b, sc);
    if (failed_) return false;
    pos_ = n->pos;
    // an immutable list is iterated in place; anything else is materialized first
    std::shared_ptr<JList> list;
    if (it.is_list() && it.l->kind != JSeq::generator && !n->c) {
      if (!charge(it.l->items.size() / 8 + 1)) return false;
      list = it.l;
    } else {
      list = std::make_shared<JList>();
      if (!iterate(it, list->items)) return false;
    }
    std::vector<JValue>& items = list->items;
    if (n->c) {
      std::vector<JValue> kept;
      for (auto& v : items) {
        auto fs = std::make_shared<JScope>();
        fs->parent = sc;
        if (!charge() || !assign(n->a, v, fs)) return false;
        JValue c = eval(n->c, fs);
        if (failed_) return false;
        if (jv_truthy(c)) kept.push_back(std::move(v));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      auto es = std::make_shared<JScope>();
      es->parent = sc;
      return exec(n->orelse, es, out);
    }
    auto loop = std::make_shared<JLoop>();
    loop->length = static_cast<int64_t>(list->items.size());
    loop->items = list;
    JValue lv;
    lv.t = JValue::T::loop;
    lv.lp = loop;
    // Jinja2 clears its "no iteration" flag at the end of the loop body, which `break` and
    // `continue` skip: the else block also runs when no iteration ran to its end.
    bool completed = false;
    for (size_t k = 0; k < list->items.size(); k++) {
      if (!charge()) return false;
      loop->index0 = static_cast<int64_t>(k);
      auto ls = std::make_shared<JScope>();
      ls->parent = sc;
      ls->set("loop", lv);
      predeclare(n->undef_names, *ls);
      if (!assign(n->a, list->items[k], ls)) return false;
      if (!exec(n->body, ls, out)) return false;
      if (flow_ == Flow::brk) {
        flow_ = Flow::normal;
        break;
      }
      if (flow_ == Flow::normal) completed = true;
      flow_ = Flow::normal;
    }
    if (!completed && !n->orelse.empty()) {
      auto es = std::make_shared<JScope>();
      es->parent = sc;
      return exec(n->orelse, es, out);
    }
    return true;
  }

  bool assign(const JNode* target, JValue v, const SP& sc) {
    if (jv_depth(v) > LLMINFER_JINJA_MAX_DEPTH)
      return fail(strf("a value nested more than %d levels deep (lists, dicts or filters such as map of each other)",
                       LLMINFER_JINJA_MAX_DEPTH));
    switch (target->k) {
      case NK::name: sc->set(target->str, std::move(v)); return true;
      case NK::nsref: {
        const JValue* ns = find_var(target->str, sc);
        if (!ns || ns->t != JValue::T::ns)
          return fail(strf("cannot assign attribute '%s' on '%s': not a namespace", target->names[0].c_str(),
                           target->str.c_str()));
        if (!charge(ns->m->items.size() / 16)) return false;
        for (auto& kv : ns->m->items)
          if (kv.first.is_str() && kv.first.text() == target->names[0]) {
            kv.second = std::move(v);
            return true;
          }
        ns->m->items.emplace_back(JValue::str(target->names[0]), std::move(v));
        return true;
      }
      case NK::tuple: {
        std::vector<JValue> parts;
        if (!iterate(v, parts)) return false;
        if (parts.size() != target->list.size()) {
          if (parts.size() > target->list.size())
            return fail(strf("too many values to unpack (expected %zu)", target->list.size()));
          return fail(strf("not enough values to unpack (expected %zu, got %zu)", target->list.size(), parts.size()));
        }
        for (size_t k = 0; k < parts.size(); k++)
          if (!assign(target->list[k], std::move(parts[k]), sc)) return false;
        return true;
      }
      default: return fail("cannot assign to this expression");
    }
  }

  static const JValue* find_var(std::string_view name, const SP& sc) {
    for (JScope* s = sc.get(); s; s = s->parent.get())
      if (JValue* v = s->find_local(name)) return v;
    return nullptr;
  }

  // ================================================================ expressions
  static bool is_global(std::string_view n) {
    return n == "range" || n == "dict" || n == "namespace" || n == "raise_exception" || n == "strftime_now" ||
           n == "cycler" || n == "joiner" || n == "lipsum";
  }
  JValue lookup(const std::string& name, const SP& sc) {
    if (const JValue* v = find_var(name, sc)) return *v;
    if (is_global(name)) {
      JFunc f;
      f.kind = FnKind::global;
      f.name = name;
      return jv_func(std::move(f));
    }
    return JValue::undefined(strf("'%s' is undefined", name.c_str()));
  }

  // Jinja2's optimizer computes constant subexpressions when it compiles the template, through
  // getitem(), which turns a failing subscript into undefined ("abc"[5] and (none)[1:] are
  // undefined there, but an error at run time). A folded value is kept only when it is a plain
  // value (has a "safe repr"); the {{ }} expression itself is always kept.
  static bool safe_repr(const JValue& v, int depth = 0) {
    if (depth > 64) return false;
    switch (v.t) {
      case JValue::T::none:
      case JValue::T::boolean:
      case JValue::T::integer:
      case JValue::T::real:
      case JValue::T::string: return true;
      case JValue::T::list:
        if (v.l->kind == JSeq::range) return true;
        if (v.l->kind != JSeq::list && v.l->kind != JSeq::tuple) return false;
        for (const auto& x : v.l->items)
          if (!safe_repr(x, depth + 1)) return false;
        return true;
      case JValue::T::dict:
        for (const auto& kv : v.m->items)
          if (!safe_repr(kv.first, depth + 1) || !safe_repr(kv.second, depth + 1)) return false;
        return true;
      default: return false;
    }
  }
  JValue eval_folded(const JNode* n, const SP& sc) {
    uint32_t pos = pos_;
    uint64_t steps = steps_;
    fold_ = true;
    JValue v = eval_node(n, sc);
    fold_ = false;
    if (impossible_) {  // it reached a non-constant operand: not foldable after all
      impossible_ = failed_ = false;
    } else if (failed_ || safe_repr(v) || n == print_root_) {
      return v;
    }
    pos_ = pos;  // not foldable: evaluate as at run time
    steps_ = steps;
    return eval_node(n, sc);
  }

  JValue eval(const JNode* n, const SP& sc) {
    if (failed_) return JValue();
    if (!fold_ && n->constant && n->k != NK::konst) return eval_folded(n, sc);
    if (fold_ && !n->constant) {  // unwinds the constant evaluation without an error (eval_folded)
      impossible_ = failed_ = true;
      return JValue();
    }
    return eval_node(n, sc);
  }
  JValue eval_node(const JNode* n, const SP& sc) {
    DepthGuard g(*this);
    if (!g.ok) return JValue();
    pos_ = n->pos;
    if (!charge()) return JValue();
    switch (n->k) {
      case NK::konst: return n->val;
      case NK::name: return lookup(n->str, sc);
      case NK::list:
      case NK::tuple: {
        std::vector<JValue> items;
        items.reserve(n->list.size());
        for (const JNode* e : n->list) {
          items.push_back(eval(e, sc));
          if (failed_) return JValue();
        }
        return JValue::list(std::move(items), n->k == NK::tuple ? JSeq::tuple : JSeq::list);
      }
      case NK::dict: {
        JValue d;
        d.t = JValue::T::dict;
        d.m = std::make_shared<JDict>();
        for (size_t k = 0; k < n->list.size(); k++) {
          JValue key = eval(n->list[k], sc);
          if (failed_) return JValue();
          JValue val = eval(n->kw[k], sc);
          if (failed_) return JValue();
          if (!dict_set(*d.m, std::move(key), std::move(val))) return JValue();
        }
        return d;
      }
      case NK::attr: {
        JValue o = eval(n->a, sc);
        if (failed_) return JValue();
        pos_ = n->pos;
        return get_attr(o, n->str);
      }
      case NK::item: return eval_item(n, sc);
      case NK::call: return eval_call(n, sc, nullptr);
      case NK::filter: return eval_filter(n, sc, nullptr);
      case NK::test: return eval_test(n, sc);
      case NK::not_: {
        JValue v = eval(n->a, sc);
        if (failed_) return JValue();
        return JValue::boolean(!jv_truthy(v));
      }
      case NK::neg:
      case NK::pos: return eval_unary(n, sc);
      case NK::binop: {
        JValue l = eval(n->a, sc);
        if (failed_) return JValue();
        JValue r = eval(n->b, sc);
        if (failed_) return JValue();
        pos_ = n->pos;
        return binop(static_cast<BinOp>(n->op), l, r);
      }
      case NK::compare: return eval_compare(n, sc);
      case NK::and_: {
        JValue l = eval(n->a, sc);
        if (failed_ || !jv_truthy(l)) return l;
        return eval(n->b, sc);
      }
      case NK::or_: {
        JValue l = eval(n->a, sc);
        if (failed_ || jv_truthy(l)) return l;
        return eval(n->b, sc);
      }
      case NK::cond: {
        JValue c = eval(n->a, sc);
        if (failed_) return JValue();
        if (jv_truthy(c)) return eval(n->b, sc);
        if (n->c) return eval(n->c, sc);
        return JValue::undefined("the inline if-expression evaluated to false and has no else section");
      }
      case NK::concat: {
        // "~" joins str() of each operand; with autoescape off the result is a plain str
        PText t;
        for (const JNode* e : n->list) {
          JValue v = eval(e, sc);
          if (failed_) return JValue();
          pos_ = n->pos;
          if (v.is_str() && !check_len(t.s.size() + v.text().size())) return JValue();
          if (!to_str(v, t) || !check_len(t.s.size())) return JValue();
        }
        if (!charge_str(t.s.size())) return JValue();
        return JValue::str(std::move(t));
      }
      case NK::slice: return failv("a slice is only valid inside [ ]");
      default: return failv("internal error: a statement where an expression was expected");
    }
  }

  JValue eval_unary(const JNode* n, const SP& sc) {
    JValue v = eval(n->a, sc);
    if (failed_) return JValue();
    pos_ = n->pos;
    bool neg = n->k == NK::neg;
    switch (v.t) {
      case JValue::T::boolean:
      case JValue::T::integer: {
        int64_t x = v.t == JValue::T::boolean ? (v.b ? 1 : 0) : v.i;
        if (!neg) return JValue::integer(x);
        if (x == INT64_MIN) return failv("integer overflow (integers are limited to 64 bits)");
        return JValue::integer(-x);
      }
      case JValue::T::real: return JValue::real(neg ? -v.d : v.d);
      case JValue::T::undef: fail_undef(v); return JValue();
      default: return failv(strf("bad operand type for unary %c: '%s'", neg ? '-' : '+', jv_type(v)));
    }
  }

  // ---- numbers ----
  static bool as_int(const JValue& v, int64_t& out) {
    if (v.t == JValue::T::integer) {
      out = v.i;
      return true;
    }
    if (v.t == JValue::T::boolean) {
      out = v.b ? 1 : 0;
      return true;
    }
    return false;
  }
  static double as_double(const JValue& v) {
    return v.t == JValue::T::real ? v.d : v.t == JValue::T::boolean ? (v.b ? 1.0 : 0.0) : static_cast<double>(v.i);
  }
  static int sgn(double x) { return (x > 0) - (x < 0); }

  JValue operand_type_error(BinOp op, const JValue& l, const JValue& r) {
    static const char* const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    return failv(
        strf("unsupported operand type(s) for %s: '%s' and '%s'", names[static_cast<int>(op)], jv_type(l), jv_type(r)));
  }
  JValue binop(BinOp op, const JValue& l, const JValue& r) {
    if (l.is_undef()) {
      fail_undef(l);
      return JValue();
    }
    if (op == BinOp::mod && l.is_str()) return percent_format(l, r);  // str.__mod__ takes anything
    if (r.is_undef()) {
      fail_undef(r);
      return JValue();
    }
    int64_t a = 0, b = 0;
    bool ints = as_int(l, a) && as_int(r, b);
    bool nums = l.is_num() && r.is_num();
    switch (op) {
      case BinOp::add:
        if (ints) {
          int64_t x;
          if (add_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) + as_double(r));
        return concat(l, r);
      case BinOp::sub:
        if (ints) {
          int64_t x;
          if (sub_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) - as_double(r));
        return operand_type_error(op, l, r);
      case BinOp::mul: {
        if (ints) {
          int64_t x;
          if (mul_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) * as_double(r));
        return repeat(l, r);
      }
      case BinOp::div: {
        if (!nums) return operand_type_error(op, l, r);
        double y = as_double(r);
        if (y == 0) return failv("division by zero");
        return JValue::real(as_double(l) / y);
      }
      case BinOp::floordiv:
        if (ints) {
          if (b == 0) return failv("integer division or modulo by zero");
          if (a == INT64_MIN && b == -1) return failv("integer overflow (integers are limited to 64 bits)");
          int64_t q = a / b;
          if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
          return JValue::integer(q);
        }
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (y == 0) return failv("float floor division by zero");
          return JValue::real(py_floordiv(x, y));
        }
        return operand_type_error(op, l, r);
      case BinOp::mod:
        if (ints) {
          if (b == 0) return failv("integer division or modulo by zero");
          if (b == -1) return JValue::integer(0);
          int64_t m = a % b;
          if (m != 0 && ((m < 0) != (b < 0))) m += b;
          return JValue::integer(m);
        }
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (y == 0) return failv("float modulo");
          double m = std::fmod(x, y);
          if (m != 0) {
            if ((y < 0) != (m < 0)) m += y;
          } else {
            m = std::copysign(0.0, y);
          }
          return JValue::real(m);
        }
        if (l.is_str()) return percent_format(l, r);
        return operand_type_error(op, l, r);
      case BinOp::pow:
        if (ints && b >= 0) return int_pow(a, b);
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (x == 0 && y < 0) return failv("0.0 cannot be raised to a negative power");
          if (x < 0 && y != std::floor(y))
            return failv("unsupported: a negative number to a fractional power is complex");
          return JValue::real(std::pow(x, y));
        }
        return operand_type_error(op, l, r);
    }
    return operand_type_error(op, l, r);
  }
  // str + str (Markup if either is, the other escaped), list + list, tuple + tuple
  JValue concat(const JValue& l, const JValue& r) {
    if (l.is_str() && r.is_str()) {
      if (!check_len(l.text().size() + r.text().size()) || !charge_str(l.text().size() + r.text().size()))
        return JValue();
      PText t;
      bool markup = jv_is_markup(l) || jv_is_markup(r);
      if (markup && !jv_is_markup(l))
        html_escape(t, *l.s);
      else
        t.add(*l.s);
      if (markup && !jv_is_markup(r))
        html_escape(t, *r.s);
      else
        t.add(*r.s);
      return markup ? jv_markup(std::move(t)) : JValue::str(std::move(t));
    }
    if (l.is_list() && r.is_list() && l.l->kind == r.l->kind && (l.l->kind == JSeq::list || l.l->kind == JSeq::tuple)) {
      if (!charge_list(l.l->items.size() + r.l->items.size())) return JValue();
      std::vector<JValue> items = l.l->items;
      items.insert(items.end(), r.l->items.begin(), r.l->items.end());
      return JValue::list(std::move(items), l.l->kind);
    }
    if (l.is_str()) return failv(strf("can only concatenate str (not \"%s\") to str", jv_type(r)));
    return operand_type_error(BinOp::add, l, r);
  }
  // str * int, list * int, tuple * int (either way round)
  JValue repeat(const JValue& l, const JValue& r) {
    const JValue* seq = nullptr;
    int64_t times = 0;
    if ((l.is_str() || l.is_list()) && as_int(r, times))
      seq = &l;
    else if ((r.is_str() || r.is_list()) && as_int(l, times))
      seq = &r;
    if (!seq) return operand_type_error(BinOp::mul, l, r);
    if (times < 0) times = 0;
    if (seq->is_str()) {
      size_t unit = seq->text().size();
      if (unit && static_cast<uint64_t>(times) > opt_.max_string / unit + 1) {
        check_len(opt_.max_string + 1);
        return JValue();
      }
      if (!check_len(unit * static_cast<size_t>(times)) || !charge_str(unit * static_cast<size_t>(times)))
        return JValue();
      PText t;
      for (int64_t k = 0; k < times; k++) t.add(*seq->s);
      JValue out = JValue::str(std::move(t));
      out.b = seq->b;
      return out;
    }
    if (seq->l->kind != JSeq::list && seq->l->kind != JSeq::tuple) return operand_type_error(BinOp::mul, l, r);
    uint64_t total = 0;
    if (mul_overflows(seq->l->items.size(), static_cast<uint64_t>(times), &total))
      return failv("list repetition too large");
    if (!charge_list(total)) return JValue();
    std::vector<JValue> items;
    for (int64_t k = 0; k < times; k++) items.insert(items.end(), seq->l->items.begin(), seq->l->items.end());
    return JValue::list(std::move(items), seq->l->kind);
  }
  // a ** b for b >= 0, by squaring, with overflow checks
  JValue int_pow(int64_t a, int64_t b) {
    int64_t x = 1, base = a, e = b;
    while (e > 0) {
      if (e & 1) {
        if (mul_overflow(x, base, &x)) return failv("integer overflow (integers are limited to 64 bits)");
      }
      e >>= 1;
      if (e > 0 && mul_overflow(base, base, &base)) return failv("integer overflow (integers are limited to 64 bits)");
    }
    return JValue::integer(x);
  }
  static double py_floordiv(double x, double y) {
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
    if (div != 0) {
      double f = std::floor(div);
      if (div - f > 0.5) f += 1.0;
      return f;
    }
    return std::copysign(0.0, x / y);
  }

  // ---- comparison ----
  bool py_eq(const JValue& a, const JValue& b, int depth = 0) {
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return false;
    if (a.is_num() && b.is_num()) {
      int64_t x, y;
      if (as_int(a, x) && as_int(b, y)) return x == y;
      if (a.t == JValue::T::real && b.t == JValue::T::real) return a.d == b.d;
      // int vs float: exact, as Python
      double f = a.t == JValue::T::real ? a.d : b.d;
      int64_t i = 0;
      as_int(a.t == JValue::T::real ? b : a, i);
      if (!(f == std::floor(f)) || std::fabs(f) >= 9.2e18) return false;
      return static_cast<int64_t>(f) == i;
    }
    if (a.t != b.t) return false;
    switch (a.t) {
      case JValue::T::undef:
      case JValue::T::none: return true;
      case JValue::T::string:
        if (a.s == b.s) return true;
        if (a.s->s.size() != b.s->s.size()) return false;
        return charge(a.s->s.size() / 64) && a.s->s == b.s->s;
      case JValue::T::list: {
        if (a.l == b.l) return true;
        if (a.l->kind == JSeq::generator || b.l->kind == JSeq::generator) return false;  // compared by identity
        if (a.l->kind != b.l->kind || a.l->items.size() != b.l->items.size()) return false;
        for (size_t k = 0; k < a.l->items.size(); k++)
          if (!py_eq(a.l->items[k], b.l->items[k], depth + 1)) return false;
        return true;
      }
      case JValue::T::dict: {
        if (a.m == b.m) return true;
        if (a.m->items.size() != b.m->items.size()) return false;
        for (const auto& kv : a.m->items) {
          const JValue* o = dict_find(*b.m, kv.first);
          if (!o || !py_eq(kv.second, *o, depth + 1)) return false;
        }
        return true;
      }
      case JValue::T::ns: return a.m == b.m;
      case JValue::T::func: return a.f == b.f;
      case JValue::T::loop: return a.lp == b.lp;
      default: return false;
    }
  }
  // Python's ordering; false (after failing) when the types cannot be ordered.
  bool py_less(const JValue& a, const JValue& b, bool& less, const char* op = "<", int depth = 0) {
    if (a.is_undef()) return fail_undef(a);
    if (b.is_undef()) return fail_undef(b);
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return fail("comparison nested too deeply");
    if (a.is_num() && b.is_num()) {
      int64_t x, y;
      if (as_int(a, x) && as_int(b, y)) {
        less = x < y;
      } else {
        less = as_double(a) < as_double(b);
      }
      return true;
    }
    if (a.is_str() && b.is_str()) {
      if (!charge(std::min(a.text().size(), b.text().size()) / 64)) return false;
      less = a.text() < b.text();
      return true;
    }
    if (a.is_list() && b.is_list() && a.l->kind == b.l->kind && (a.l->kind == JSeq::list || a.l->kind == JSeq::tuple)) {
      size_t n = std::min(a.l->items.size(), b.l->items.size());
      for (size_t k = 0; k < n; k++) {
        if (py_eq(a.l->items[k], b.l->items[k], depth + 1)) continue;
        return py_less(a.l->items[k], b.l->items[k], less, op, depth + 1);
      }
      less = a.l->items.size() < b.l->items.size();
      return true;
    }
    return fail(strf("'%s' not supported between instances of '%s' and '%s'", op, jv_type(a), jv_type(b)));
  }
  bool compare(CmpOp op, const JValue& a, const JValue& b, bool& result) {
    switch (op) {
      case CmpOp::eq: result = py_eq(a, b); return true;
      case CmpOp::ne: result = !py_eq(a, b); return true;
      case CmpOp::lt: return py_less(a, b, result, "<");
      case CmpOp::gt: return py_less(b, a, result, ">");
      case CmpOp::le: {
        bool gt;
        if (!py_less(b, a, gt, "<=")) return false;
        result = !gt;
        return true;
      }
      case CmpOp::ge: {
        bool lt;
        if (!py_less(a, b, lt, ">=")) return false;
        result = !lt;
        return true;
      }
      case CmpOp::in: return contains(b, a, result);
      case CmpOp::notin:
        if (!contains(b, a, result)) return false;
        result = !result;
        return true;
    }
    return false;
  }
  JValue eval_compare(const JNode* n, const SP& sc) {
    JValue left = eval(n->list[0], sc);
    if (failed_) return JValue();
    for (size_t k = 0; k < n->ops.size(); k++) {
      JValue right = eval(n->list[k + 1], sc);
      if (failed_) return JValue();
      pos_ = n->pos;
      bool r = false;
      if (!compare(static_cast<CmpOp>(n->ops[k]), left, right, r)) return JValue();
      if (!r) return JValue::boolean(false);
      left = std::move(right);
    }
    return JValue::boolean(true);
  }
  bool contains(const JValue& container, const JValue& item, bool& result) {
    result = false;
    switch (container.t) {
      case JValue::T::string:
        if (!item.is_str()) return fail(strf("'in <string>' requires string as left operand, not %s", jv_type(item)));
        if (!charge(container.text().size() / 64)) return false;
        result = container.text().find(item.text()) != std::string::npos;
        return true;
      case JValue::T::list:
        if (container.l->kind == JSeq::generator) {  // consumes the generator up to the match
          for (;;) {
            JValue v;
            bool done = false;
            if (!gen_pull(*container.l, v, done)) return false;
            if (done) return true;
            if (py_eq(v, item)) return (result = true), true;
          }
        }
        if (container.l->kind == JSeq::dict_items &&
            !(item.is_list() && item.l->kind == JSeq::tuple && item.l->items.size() == 2))
          return true;  // only (key, value) pairs can be in dict.items()
        if (container.l->kind == JSeq::dict_keys || container.l->kind == JSeq::dict_items) {
          const JValue& key = container.l->kind == JSeq::dict_keys ? item : item.l->items[0];
          if (key.is_dict() || (key.is_list() && key.l->kind != JSeq::tuple))
            return fail(strf("unhashable type: '%s'", jv_type(key)));
        }
        if (!charge(container.l->items.size())) return false;
        for (const auto& v : container.l->items)
          if (py_eq(v, item)) {
            result = true;
            break;
          }
        return true;
      case JValue::T::dict:
        if (item.is_dict() || (item.is_list() && item.l->kind != JSeq::tuple))
          return fail(strf("unhashable type: '%s'", jv_type(item)));
        result = dict_find(*container.m, item) != nullptr;
        return true;
      case JValue::T::undef: return true;
      default: return fail(strf("argument of type '%s' is not iterable", jv_type(container)));
    }
  }

  // ---- dicts ----
  const JValue* dict_find(const JDict& d, const JValue& key) {
    if (d.items.size() >= 16 && !charge(d.items.size() / 16)) return nullptr;
    for (const auto& kv : d.items)
      if (py_eq(kv.first, key)) return &kv.second;
    return nullptr;
  }
  bool dict_set(JDict& d, JValue key, JValue val) {
    if (key.t == JValue::T::list && key.l->kind != JSeq::tuple) return fail("unhashable type: 'list'");
    if (key.t == JValue::T::dict) return fail("unhashable type: 'dict'");
    if (!charge(d.items.size() / 16 + 1)) return false;
    d.depth = std::max(d.depth, std::max(jv_depth(key), jv_depth(val)) + 1);
    for (auto& kv : d.items)
      if (py_eq(kv.first, key)) {
        kv.second = std::move(val);
        return true;
      }
    d.items.emplace_back(std::move(key), std::move(val));
    return true;
  }

  // ---- iteration ----
  bool iterate(const JValue& v, std::vector<JValue>& out) {
    switch (v.t) {
      case JValue::T::list:
        if (v.l->kind == JSeq::generator) {  // used up once
          out.clear();
          for (;;) {
            JValue x;
            bool done = false;
            if (!gen_pull(*v.l, x, done)) return false;
            if (done) return true;
            if (!charge_list(out.size() + 1)) return false;
            out.push_back(std::move(x));
          }
        }
        if (!charge_list(v.l->items.size())) return false;
        out = v.l->items;
        return true;
      case JValue::T::dict:
        if (!charge_list(v.m->items.size())) return false;
        out.clear();
        for (const auto& kv : v.m->items) out.push_back(kv.first);
        return true;
      case JValue::T::string: {
        const PText& s = *v.s;
        if (!charge_list(jcp_count(s.s))) return false;
        out.clear();
        size_t i = 0;
        while (i < s.s.size()) {
          size_t b = i;
          jcp_next(s.s, i);
          PText c;
          c.add_range(s, b, i);
          out.push_back(JValue::str(std::move(c)));
        }
        return true;
      }
      case JValue::T::undef: out.clear(); return true;
      default: return fail(strf("'%s' object is not iterable", jv_type(v)));
    }
  }

  // ---- generators (what map/select/... return: lazy, single use, always true, no len()) ----
  using Puller = std::function<bool(JValue& out, bool& done)>;
  // `source`: the value it pulls from (a chain of generators pulls recursively: its depth counts)
  JValue make_gen(Puller next, const JValue& source) {
    JValue v = JValue::list({}, JSeq::generator);
    v.l->next = std::move(next);
    v.l->depth = jv_depth(source) + 1;
    return v;
  }
  bool gen_pull(JList& g, JValue& out, bool& done) {
    done = false;
    if (g.next) {
      if (!charge()) return false;
      if (!g.next(out, done)) return false;  // (a generator never pulls from itself)
      if (done) g.next = nullptr;            // releases what it captured
      return true;
    }
    if (g.pos < g.items.size()) {
      out = g.items[g.pos++];
      return true;
    }
    done = true;
    return true;
  }
  // Pulls the items of any iterable one by one; a non-iterable fails on the first pull (as a
  // Python generator fails when it first runs, not when it is made).
  Puller puller(JValue v) {
    return [this, v, idx = size_t(0), off = std::vector<size_t>()](JValue& out, bool& done) mutable -> bool {
      done = false;
      switch (v.t) {
        case JValue::T::list:
          if (v.l->kind == JSeq::generator) return gen_pull(*v.l, out, done);
          if (idx >= v.l->items.size()) return (done = true), true;
          out = v.l->items[idx++];
          return true;
        case JValue::T::dict:
          if (idx >= v.m->items.size()) return (done = true), true;
          out = v.m->items[idx++].first;
          return true;
        case JValue::T::string: {
          if (off.empty()) off = jcp_offsets(v.text());
          if (idx + 1 >= off.size()) return (done = true), true;
          PText c;
          c.add_range(*v.s, off[idx], off[idx + 1]);
          idx++;
          out = JValue::str(std::move(c));
          return true;
        }
        case JValue::T::undef: done = true; return true;
        default: return fail(strf("'%s' object is not iterable", jv_type(v)));
      }
    };
  }

  // ---- attribute and item access (Jinja2 sandbox rules) ----
  static bool is_str_method(std::string_view n) {
    static const char* const names[] = {
        "capitalize", "casefold",     "center",       "count",   "encode",     "endswith",    "expandtabs",
        "find",       "format",       "format_map",   "index",   "isalnum",    "isalpha",     "isascii",
        "isdecimal",  "isdigit",      "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",
        "istitle",    "isupper",      "join",         "ljust",   "lower",      "lstrip",      "maketrans",
        "partition",  "removeprefix", "removesuffix", "replace", "rfind",      "rindex",      "rjust",
        "rpartition", "rsplit",       "rstrip",       "split",   "splitlines", "startswith",  "strip",
        "swapcase",   "title",        "translate",    "upper",   "zfill"};
    for (const char* x : names)
      if (n == x) return true;
    return false;
  }
  JValue bound(const JValue& self, std::string_view name) {
    JFunc f;
    f.kind = FnKind::method;
    f.name = std::string(name);
    f.self = self;
    return jv_func(std::move(f));
  }
  JValue get_attr(const JValue& obj, const std::string& name) {
    switch (obj.t) {
      case JValue::T::undef: fail_undef(obj); return JValue();
      case JValue::T::string:
        if (is_str_method(name)) return bound(obj, name);
        break;
      case JValue::T::list: {
        static const char* const mutators[] = {"append", "clear",  "extend",  "insert",
                                               "pop",    "remove", "reverse", "sort"};
        bool tuple = obj.l->kind == JSeq::tuple;
        if (obj.l->kind == JSeq::list || tuple) {
          if (name == "index" || name == "count" || (!tuple && name == "copy")) return bound(obj, name);
          if (!tuple)
            for (const char* m : mutators)
              if (name == m) return unsafe_attr(obj, name);
        }
        break;
      }
      case JValue::T::dict:
        if (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy")
          return bound(obj, name);
        if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" || name == "clear")
          return unsafe_attr(obj, name);
        if (name == "fromkeys") return failv("unsupported construct: dict.fromkeys");
        if (const JValue* v = obj.m->find(name)) return *v;
        break;
      case JValue::T::ns:
        if (const JValue* v = obj.m->find(name)) return *v;
        break;
      case JValue::T::loop: return loop_attr(obj, name);
      case JValue::T::integer:
      case JValue::T::boolean:
        if (name == "real" || name == "numerator") return JValue::integer(obj.t == JValue::T::boolean ? obj.b : obj.i);
        if (name == "imag") return JValue::integer(0);
        if (name == "denominator") return JValue::integer(1);
        break;
      case JValue::T::real:
        if (name == "real") return obj;
        if (name == "imag") return JValue::real(0.0);
        break;
      case JValue::T::func:
        if (obj.f->kind == FnKind::cycler_next && name == "next") return obj;
        if (obj.f->kind == FnKind::cycler_next && name == "current") {
          const JList& items = *obj.f->self.l;
          int64_t pos = items.items.empty() ? 0 : obj.f->self.i;
          return items.items.empty() ? JValue::none() : items.items[static_cast<size_t>(pos)];
        }
        if (obj.f->kind == FnKind::cycler_next && name == "reset") {
          JFunc f = *obj.f;
          f.kind = FnKind::cycler_reset;
          JValue v = jv_func(std::move(f));
          v.f->self = obj.f->self;
          v.f->node = nullptr;
          v.f->closure.reset();
          v.f->name = "reset";
          JValue holder = obj;  // reset acts on the same state
          v.f->self = holder;
          return v;
        }
        break;
      default: break;
    }
    if (name.size() > 1 && name[0] == '_' && name[1] == '_') return unsafe_attr(obj, name);
    return undef_attr(obj, name);
  }
  JValue loop_attr(const JValue& obj, const std::string& name) {
    const JLoop& L = *obj.lp;
    if (name == "index0") return JValue::integer(L.index0);
    if (name == "index") return JValue::integer(L.index0 + 1);
    if (name == "revindex") return JValue::integer(L.length - L.index0);
    if (name == "revindex0") return JValue::integer(L.length - L.index0 - 1);
    if (name == "first") return JValue::boolean(L.index0 == 0);
    if (name == "last") return JValue::boolean(L.index0 + 1 == L.length);
    if (name == "length") return JValue::integer(L.length);
    if (name == "depth") return JValue::integer(L.depth0 + 1);
    if (name == "depth0") return JValue::integer(L.depth0);
    if (name == "previtem") {
      if (L.index0 == 0) return JValue::undefined("there is no previous item");
      return L.items->items[static_cast<size_t>(L.index0 - 1)];
    }
    if (name == "nextitem") {
      if (L.index0 + 1 >= L.length) return JValue::undefined("there is no next item");
      return L.items->items[static_cast<size_t>(L.index0 + 1)];
    }
    if (name == "cycle" || name == "changed") {
      JFunc f;
      f.kind = name == "cycle" ? FnKind::loop_cycle : FnKind::loop_changed;
      f.name = name;
      f.self = obj;
      return jv_func(std::move(f));
    }
    return undef_attr(obj, name);
  }
  JValue get_item(const JValue& obj, const JValue& key) {
    int64_t idx;
    switch (obj.t) {
      case JValue::T::undef: fail_undef(obj); return JValue();
      case JValue::T::list:
        if ((obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range) &&
            as_int(key, idx)) {
          int64_t n = static_cast<int64_t>(obj.l->items.size());
          if (idx < 0) idx += n;
          if (idx < 0 || idx >= n)
            return JValue::undefined(strf("'%s object' has no element %lld", jv_type(obj),
                                          static_cast<long long>(as_int(key, idx) ? idx : 0)));
          return obj.l->items[static_cast<size_t>(idx)];
        }
        break;
      case JValue::T::string:
        if (as_int(key, idx)) {
          // walks to the code point (no table of offsets: 8 bytes per byte of a long string)
          const PText& s = *obj.s;
          if (!charge(s.s.size() / 64)) return JValue();
          if (idx < 0) idx += static_cast<int64_t>(jcp_count(s.s));
          size_t i = 0;
          for (int64_t k = 0; k < idx && i < s.s.size(); k++) jcp_next(s.s, i);
          if (idx < 0 || i >= s.s.size()) return JValue::undefined("string index out of range");
          size_t b = i;
          jcp_next(s.s, i);
          PText c;
          c.add_range(s, b, i);
          return JValue::str(std::move(c));
        }
        break;
      case JValue::T::dict:
        if (const JValue* v = dict_find(*obj.m, key)) return *v;
        break;
      default: break;
    }
    if (key.is_str()) return get_attr(obj, key.text());
    return JValue::undefined(strf("'%s object' has no element", jv_type(obj)));
  }

  JValue eval_item(const JNode* n, const SP& sc) {
    JValue obj = eval(n->a, sc);
    if (failed_) return JValue();
    if (n->b->k == NK::slice) {
      const JNode* s = n->b;
      JValue parts[3];
      const JNode* nodes[3] = {s->b, s->c, s->d};
      for (int k = 0; k < 3; k++) {
        if (nodes[k]) {
          parts[k] = eval(nodes[k], sc);
          if (failed_) return JValue();
        } else {
          parts[k] = JValue::none();
        }
      }
      pos_ = n->pos;
      if (fold_ && !obj.is_undef() && !obj.is_str() &&
          !(obj.is_list() && (obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range)))
        return JValue::undefined(strf("'%s' object is not subscriptable", jv_type(obj)));
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    JValue key = eval(n->b, sc);
    if (failed_) return JValue();
    pos_ = n->pos;
    return get_item(obj, key);
  }

  // Python slice semantics on str / list / tuple; anything else gives undefined (as Jinja2's getitem).
  JValue slice(const JValue& obj, const JValue& start, const JValue& stop, const JValue& step) {
    if (obj.is_undef()) {
      fail_undef(obj);
      return JValue();
    }
    int64_t st = 1;
    if (!step.is_none() && !as_int(step, st))
      return failv("slice indices must be integers or None or have an __index__ method");
    if (st == 0) return failv("slice step cannot be zero");
    bool is_str = obj.is_str();
    bool is_seq =
        obj.is_list() && (obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range);
    if (!is_str && !is_seq) {
      if (obj.is_dict()) return failv("unhashable type: 'slice'");
      return failv(strf("'%s' object is not subscriptable", jv_type(obj)));
    }
    std::vector<size_t> off;
    int64_t n;
    if (is_str) {
      off = jcp_offsets(obj.text());
      n = static_cast<int64_t>(off.size()) - 1;
    } else {
      n = static_cast<int64_t>(obj.l->items.size());
    }
    auto adjust = [&](const JValue& v, int64_t def, int64_t& out) -> bool {
      if (v.is_none()) {
        out = def;
        return true;
      }
      if (!as_int(v, out)) return false;
      if (out < 0) {
        out += n;
        if (out < 0) out = st < 0 ? -1 : 0;
      } else if (out >= n) {
        out = st < 0 ? n - 1 : n;
      }
      return true;
    };
    int64_t b, e;
    if (!adjust(start, st < 0 ? n - 1 : 0, b) || !adjust(stop, st < 0 ? -1 : n, e))
      return failv("slice indices must be integers or None or have an __index__ method");
    if (!charge(static_cast<uint64_t>(n) / 8 + 1)) return JValue();
    if (is_str) {
      const PText& s = *obj.s;
      PText t;
      if (st == 1) {
        if (e > b) t.add_range(s, off[static_cast<size_t>(b)], off[static_cast<size_t>(e)]);
      } else {
        for (int64_t k = b; st > 0 ? k < e : k > e; k += st)
          t.add_range(s, off[static_cast<size_t>(k)], off[static_cast<size_t>(k) + 1]);
      }
      if (!charge_str(t.s.size())) return JValue();
      JValue r = JValue::str(std::move(t));
      r.b = obj.b;
      return r;
    }
    std::vector<JValue> items;
    for (int64_t k = b; st > 0 ? k < e : k > e; k += st) items.push_back(obj.l->items[static_cast<size_t>(k)]);
    JValue r = JValue::list(std::move(items), obj.l->kind);
    if (obj.l->kind == JSeq::range) {
      // a sliced range is a range: range(start + b*step, start + e*step, step*st)
      int64_t rs[3] = {0, 0, 1};
      std::string_view tag = obj.l->tag;
      size_t at = tag.find('(');
      for (int k = 0; k < 3 && at != std::string_view::npos && at + 1 < tag.size(); k++) {
        size_t from = at + 1;
        while (from < tag.size() && tag[from] == ' ') from++;
        std::from_chars(tag.data() + from, tag.data() + tag.size(), rs[k]);
        at = tag.find(',', from);
      }
      long double lo = static_cast<long double>(rs[0]) + static_cast<long double>(b) * rs[2];
      long double hi = static_cast<long double>(rs[0]) + static_cast<long double>(e) * rs[2];
      long double stp = static_cast<long double>(rs[2]) * st;
      if (std::fabs(lo) > 9e18L || std::fabs(hi) > 9e18L || std::fabs(stp) > 9e18L)
        return failv("integer overflow (integers are limited to 64 bits)");
      r.l->tag = stp != 1 ? strf("range(%lld, %lld, %lld)", static_cast<long long>(lo), static_cast<long long>(hi),
                                 static_cast<long long>(stp))
                          : strf("range(%lld, %lld)", static_cast<long long>(lo), static_cast<long long>(hi));
    }
    return r;
  }

  // ================================================================ calls
  bool eval_args(const JNode* n, const SP& sc, JArgs& args) {
    for (const JNode* e : n->list) {
      args.pos.push_back(eval(e, sc));
      if (failed_) return false;
    }
    if (n->dyn_args) {
      JValue v = eval(n->dyn_args, sc);
      if (failed_) return false;
      std::vector<JValue> more;
      if (!iterate(v, more)) return false;
      for (auto& x : more) args.pos.push_back(std::move(x));
    }
    for (size_t k = 0; k < n->names.size(); k++) {
      JValue v = eval(n->kw[k], sc);
      if (failed_) return false;
      args.kw.emplace_back(n->names[k], std::move(v));
    }
    if (n->dyn_kwargs) {
      JValue v = eval(n->dyn_kwargs, sc);
      if (failed_) return false;
      if (!v.is_dict()) return fail("argument after ** must be a mapping");
      for (const auto& kv : v.m->items) {
        if (!kv.first.is_str()) return fail("keywords must be strings");
        args.kw.emplace_back(kv.first.text(), kv.second);
      }
    }
    return true;
  }

  JValue eval_call(const JNode* n, const SP& sc, const JValue* caller) {
    JValue fn = eval(n->a, sc);
    if (failed_) return JValue();
    JArgs args;
    if (!eval_args(n, sc, args)) return JValue();
    if (caller) args.kw.emplace_back("caller", *caller);
    pos_ = n->pos;
    return call(fn, args);
  }

  // Binds arguments to a fixed signature; out[k] is null when parameter k was not given.
  bool bind(const JArgs& a, std::initializer_list<const char*> params, std::vector<const JValue*>& out,
            std::string_view what) {
    out.assign(params.size(), nullptr);
    if (a.pos.size() > params.size())
      return fail(strf("%.*s takes at most %zu argument(s) (%zu given)", static_cast<int>(what.size()), what.data(),
                       params.size(), a.pos.size()));
    for (size_t k = 0; k < a.pos.size(); k++) out[k] = &a.pos[k];
    for (const auto& kv : a.kw) {
      size_t k = 0;
      for (const char* p : params) {
        if (kv.first == p) break;
        k++;
      }
      if (k == params.size())
        return fail(strf("%.*s got an unexpected keyword argument '%s'", static_cast<int>(what.size()), what.data(),
                         kv.first.c_str()));
      if (out[k])
        return fail(strf("%.*s got multiple values for argument '%s'", static_cast<int>(what.size()), what.data(),
                         kv.first.c_str()));
      out[k] = &kv.second;
    }
    return true;
  }

  JValue call(const JValue& fn, const JArgs& args) {
    switch (fn.t) {
      case JValue::T::undef: fail_undef(fn); return JValue();
      case JValue::T::func: break;
      case JValue::T::loop: return failv("unsupported construct: calling loop() (recursive loops)");
      default: return failv(strf("'%s' object is not callable", jv_type(fn)));
    }
    const JFunc& f = *fn.f;
    switch (f.kind) {
      case FnKind::global: return call_global(f.name, args);
      case FnKind::method: return call_method(f.self, f.name, args);
      case FnKind::macro:
      case FnKind::caller: return call_macro(fn, args);
      case FnKind::cycler_next: {
        if (!args.pos.empty() || !args.kw.empty()) return failv("cycler.next() takes no arguments");
        JValue& state = fn.f->self;  // l: items, i: position
        if (state.l->items.empty()) return JValue::none();
        JValue v = state.l->items[static_cast<size_t>(state.i)];
        state.i = (state.i + 1) % static_cast<int64_t>(state.l->items.size());
        return v;
      }
      case FnKind::cycler_reset: f.self.f->self.i = 0; return JValue::none();
      case FnKind::joiner: {
        if (!args.pos.empty() || !args.kw.empty()) return failv("joiner() takes no arguments");
        JValue& state = fn.f->self;  // s: separator, i: used
        if (!state.i) {
          state.i = 1;
          return JValue::str("");
        }
        return JValue::str(*state.s);
      }
      case FnKind::loop_cycle: {
        if (args.pos.empty()) return failv("no items for cycling given");
        const JLoop& L = *f.self.lp;
        return args.pos[static_cast<size_t>(L.index0 % static_cast<int64_t>(args.pos.size()))];
      }
      case FnKind::loop_changed: {
        JLoop& L = *f.self.lp;
        JValue v = JValue::list(args.pos, JSeq::tuple);
        if (!L.has_changed || !py_eq(L.last_changed, v)) {
          L.has_changed = true;
          L.last_changed = v;
          return JValue::boolean(true);
        }
        return JValue::boolean(false);
      }
    }
    return failv("internal error: unknown callable");
  }

  JValue call_macro(const JValue& fn, const JArgs& args) {
    const JFunc& f = *fn.f;
    const JNode* m = f.node;
    auto closure = f.closure.lock();
    if (!closure) return failv(strf("macro '%s' is called after the scope that defined it ended", f.name.c_str()));
    if (++call_depth_ > LLMINFER_JINJA_MAX_CALL_DEPTH) {
      call_depth_--;
      return failv(strf("macro calls nested more than %d deep (unbounded recursion?)", LLMINFER_JINJA_MAX_CALL_DEPTH));
    }
    struct Dec {
      int& d;
      ~Dec() { d--; }
    } dec{call_depth_};
    bool uses_varargs = m->op & 1, uses_kwargs = m->op & 2, uses_caller = m->op & 4;
    auto sc = std::make_shared<JScope>();
    sc->parent = closure;
    const auto& params = m->names;
    std::vector<bool> given(params.size(), false);
    size_t npos = std::min(args.pos.size(), params.size());
    for (size_t k = 0; k < npos; k++) {
      sc->set(params[k], args.pos[k]);
      given[k] = true;
    }
    if (args.pos.size() > params.size() && !uses_varargs)
      return failv(strf("macro '%s' takes not more than %zu argument(s)", f.name.c_str(), params.size()));
    JValue kwargs;
    kwargs.t = JValue::T::dict;
    kwargs.m = std::make_shared<JDict>();
    bool have_caller = false;
    for (const auto& kv : args.kw) {
      size_t k = 0;
      while (k < params.size() && params[k] != kv.first) k++;
      if (k < params.size()) {
        if (given[k])
          return failv(strf("macro '%s' got multiple values for argument '%s'", f.name.c_str(), kv.first.c_str()));
        sc->set(params[k], kv.second);
        given[k] = true;
      } else if (kv.first == "caller" && f.kind == FnKind::macro && uses_caller) {
        sc->set("caller", kv.second);
        have_caller = true;
      } else if (uses_kwargs) {
        kwargs.m->items.emplace_back(JValue::str(kv.first), kv.second);
      } else if (kv.first == "caller" && f.kind == FnKind::macro) {
        // a call block whose macro never calls caller(): Jinja2 accepts it
      } else {
        return failv(strf("macro '%s' takes no keyword argument '%s'", f.name.c_str(), kv.first.c_str()));
      }
    }
    size_t first_default = params.size() - m->list.size();
    for (size_t k = 0; k < params.size(); k++) {
      if (given[k]) continue;
      if (k >= first_default) {
        JValue d = eval(m->list[k - first_default], sc);
        if (failed_) return JValue();
        sc->set(params[k], std::move(d));
      } else {
        sc->set(params[k], JValue::undefined(strf("parameter '%s' was not provided", params[k].c_str())));
      }
    }
    if (uses_varargs) {
      std::vector<JValue> extra;
      for (size_t k = params.size(); k < args.pos.size(); k++) extra.push_back(args.pos[k]);
      sc->set("varargs", JValue::list(std::move(extra), JSeq::tuple));
    }
    if (uses_kwargs) sc->set("kwargs", kwargs);
    if (uses_caller && !have_caller && f.kind == FnKind::macro)
      sc->set("caller", JValue::undefined("no caller defined"));
    predeclare(m->undef_names, *sc);
    PText out;
    Flow saved = flow_;
    flow_ = Flow::normal;
    bool ok = exec(m->body, sc, out);
    flow_ = saved;
    if (!ok) return JValue();
    return JValue::str(std::move(out));
  }

  // ---- globals ----
  // Found by name in a sorted table; is_global() names the ones a template can see, and one of
  // those that is not here (lipsum) is an error that names it.
  JValue call_global(const std::string& name, const JArgs& args) {
    struct Def {
      std::string_view name;
      JValue (JRender::*fn)(const std::string& name, const JArgs& args);
    };
    static constexpr Def table[] = {
        {"cycler", &JRender::global_cycler},
        {"dict", &JRender::global_dict},
        {"joiner", &JRender::global_joiner},
        {"namespace", &JRender::global_dict},
        {"raise_exception", &JRender::global_raise_exception},
        {"range", &JRender::global_range},
        {"strftime_now", &JRender::global_strftime_now},
    };
    static_assert(jtable_sorted(table), "the globals table must be sorted by name");
    const Def* d = jtable_find(table, name);
    if (!d) return failv(strf("unsupported construct: the global function '%s'", name.c_str()));
    return (this->*d->fn)(name, args);
  }
  JValue global_raise_exception(const std::string&, const JArgs& args) {
    std::vector<const JValue*> a;
    if (!bind(args, {"message"}, a, "raise_exception()")) return JValue();
    PText t;
    if (a[0] && !to_str(*a[0], t)) return JValue();
    raised = true;
    return failv(t.s);
  }
  JValue global_strftime_now(const std::string&, const JArgs& args) {
    std::vector<const JValue*> a;
    if (!bind(args, {"format"}, a, "strftime_now()")) return JValue();
    if (!a[0] || !a[0]->is_str()) return failv("strftime_now() expects a format string");
    std::tm tm = opt_.clock ? opt_.clock() : local_now();
    std::string out;
    if (!strftime_py(a[0]->text(), tm, out)) return JValue();
    return JValue::str(std::move(out));
  }
  JValue global_range(const std::string&, const JArgs& args) {
    int64_t v[3] = {0, 0, 1};
    if (!args.kw.empty()) return failv("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3)
      return failv(strf("range expected 1 to 3 arguments, got %zu", args.pos.size()));
    for (size_t k = 0; k < args.pos.size(); k++)
      if (!as_int(args.pos[k], v[k]))
        return failv(strf("'%s' object cannot be interpreted as an integer", jv_type(args.pos[k])));
    int64_t start = 0, stop = v[0], step = 1;
    if (args.pos.size() >= 2) {
      start = v[0];
      stop = v[1];
    }
    if (args.pos.size() == 3) step = v[2];
    if (step == 0) return failv("range() arg 3 must not be zero");
    long double count = 0;
    if (step > 0 && stop > start) count = std::ceil((static_cast<long double>(stop) - start) / step);
    if (step < 0 && stop < start)
      count = std::ceil((static_cast<long double>(start) - stop) / -static_cast<long double>(step));
    if (count > LLMINFER_JINJA_MAX_RANGE)
      return failv(strf("range too big: the sandbox blocks ranges larger than %d items", LLMINFER_JINJA_MAX_RANGE));
    if (!charge_list(static_cast<uint64_t>(count))) return JValue();
    std::vector<JValue> items;
    items.reserve(static_cast<size_t>(count));
    for (int64_t k = 0; k < static_cast<int64_t>(count); k++) items.push_back(JValue::integer(start + k * step));
    JValue r = JValue::list(std::move(items), JSeq::range);
    r.l->tag = args.pos.size() == 3 && step != 1
                   ? strf("range(%lld, %lld, %lld)", static_cast<long long>(start), static_cast<long long>(stop),
                          static_cast<long long>(step))
                   : strf("range(%lld, %lld)", static_cast<long long>(start), static_cast<long long>(stop));
    return r;
  }
  // dict(), namespace()
  JValue global_dict(const std::string& name, const JArgs& args) {
    JValue d;
    if (name == "dict") {
      d.t = JValue::T::dict;
      d.m = std::make_shared<JDict>();
    } else {
      d = make_ns();
    }
    if (args.pos.size() > 1)
      return failv(strf("%s expected at most 1 argument, got %zu", name.c_str(), args.pos.size()));
    if (!args.pos.empty()) {
      const JValue& src = args.pos[0];
      if (src.is_dict() || src.t == JValue::T::ns) {
        for (const auto& kv : src.m->items)
          if (!dict_set(*d.m, kv.first, kv.second)) return JValue();
      } else {
        std::vector<JValue> pairs;
        if (!iterate(src, pairs)) return JValue();
        for (auto& p : pairs) {
          std::vector<JValue> kv;
          if (!iterate(p, kv)) return JValue();
          if (kv.size() != 2) return failv("dictionary update sequence element has the wrong length; 2 is required");
          if (!dict_set(*d.m, kv[0], kv[1])) return JValue();
        }
      }
    }
    for (const auto& kv : args.kw)
      if (!dict_set(*d.m, JValue::str(kv.first), kv.second)) return JValue();
    return d;
  }
  JValue global_cycler(const std::string&, const JArgs& args) {
    if (!args.kw.empty())
      return failv(strf("cycler() got an unexpected keyword argument '%s'", args.kw[0].first.c_str()));
    if (args.pos.empty()) return failv("cycler(): at least one item has to be provided");
    JFunc f;
    f.kind = FnKind::cycler_next;
    f.name = "cycler";
    f.self = JValue::list(args.pos);
    f.self.i = 0;
    return jv_func(std::move(f));
  }
  JValue global_joiner(const std::string&, const JArgs& args) {
    std::vector<const JValue*> a;
    if (!bind(args, {"sep"}, a, "joiner()")) return JValue();
    JFunc f;
    f.kind = FnKind::joiner;
    f.name = "joiner";
    PText sep(", ");
    if (a[0]) {
      sep = PText();
      if (!to_str(*a[0], sep)) return JValue();
    }
    f.self = JValue::str(std::move(sep));
    f.self.i = 0;
    return jv_func(std::move(f));
  }

  static std::tm local_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
#if defined(_WIN32)
    localtime_s(&tm, &t);
#else
    localtime_r(&t, &tm);
#endif
    return tm;
  }
  // C-locale strftime for the directives templates use (glibc's "%-d" style flags too).
  bool strftime_py(const std::string& fmt, const std::tm& tm, std::string& out) {
    static const char* const wd[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    static const char* const mo[] = {"January", "February", "March",     "April",   "May",      "June",
                                     "July",    "August",   "September", "October", "November", "December"};
    int wday = ((tm.tm_wday % 7) + 7) % 7, mon = ((tm.tm_mon % 12) + 12) % 12;
    for (size_t k = 0; k < fmt.size(); k++) {
      if (fmt[k] != '%' || k + 1 >= fmt.size()) {
        out += fmt[k];
        continue;
      }
      char c = fmt[++k];
      bool nopad = false;
      if (c == '-' && k + 1 < fmt.size()) {
        nopad = true;
        c = fmt[++k];
      }
      auto num = [&](long v, int width) { out += nopad ? strf("%ld", v) : strf("%0*ld", width, v); };
      switch (c) {
        case '%': out += '%'; break;
        case 'a': out += std::string(wd[wday]).substr(0, 3); break;
        case 'A': out += wd[wday]; break;
        case 'b':
        case 'h': out += std::string(mo[mon]).substr(0, 3); break;
        case 'B': out += mo[mon]; break;
        case 'd': num(tm.tm_mday, 2); break;
        case 'e': out += nopad ? strf("%d", tm.tm_mday) : strf("%2d", tm.tm_mday); break;
        case 'm': num(mon + 1, 2); break;
        case 'y': num(((tm.tm_year + 1900) % 100 + 100) % 100, 2); break;
        case 'Y': out += strf("%ld", static_cast<long>(tm.tm_year) + 1900); break;
        case 'H': num(tm.tm_hour, 2); break;
        case 'I': num(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12, 2); break;
        case 'M': num(tm.tm_min, 2); break;
        case 'S': num(tm.tm_sec, 2); break;
        case 'p': out += tm.tm_hour < 12 ? "AM" : "PM"; break;
        case 'j': num(tm.tm_yday + 1, 3); break;
        case 'w': out += strf("%d", wday); break;
        case 'u': out += strf("%d", wday == 0 ? 7 : wday); break;
        case 'D': out += strf("%02d/%02d/%02d", mon + 1, tm.tm_mday, ((tm.tm_year + 1900) % 100 + 100) % 100); break;
        case 'F': out += strf("%ld-%02d-%02d", static_cast<long>(tm.tm_year) + 1900, mon + 1, tm.tm_mday); break;
        case 'T': out += strf("%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec); break;
        case 'R': out += strf("%02d:%02d", tm.tm_hour, tm.tm_min); break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: return fail(strf("unsupported construct: strftime_now directive '%%%c'", c));
      }
    }
    return check_len(out.size());
  }

  // ================================================================ printing
  bool to_str(const JValue& v, PText& out, int depth = 0) {
    switch (v.t) {
      case JValue::T::undef: return true;
      case JValue::T::none: out.add("None"); return true;
      case JValue::T::boolean: out.add(v.b ? "True" : "False"); return true;
      case JValue::T::integer: out.add(std::to_string(v.i)); return true;
      case JValue::T::real: out.add(py_float_repr(v.d)); return true;
      case JValue::T::string: out.add(*v.s); return true;
      case JValue::T::list:
      case JValue::T::dict:
      case JValue::T::ns: {
        size_t before = out.s.size();
        return repr(v, out, depth) && charge_str(out.s.size() - before) && check_len(out.s.size());
      }
      case JValue::T::func: return fail("unsupported construct: printing a function or macro object");
      case JValue::T::loop: return fail("unsupported construct: printing a loop object");
    }
    return true;
  }
  bool repr(const JValue& v, PText& out, int depth = 0) {
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return fail("value nested too deeply to print");
    if (!charge() || !check_len(out.s.size())) return false;
    switch (v.t) {
      case JValue::T::undef: out.add("Undefined"); return true;
      case JValue::T::string:
        if (v.b) {
          out.add("Markup(");
          py_repr_str(out, *v.s);
          out.add(")");
        } else {
          py_repr_str(out, *v.s);
        }
        return true;
      case JValue::T::list: {
        const JList& L = *v.l;
        const char* open = "[";
        const char* close = "]";
        switch (L.kind) {
          case JSeq::tuple:
            open = "(";
            close = L.items.size() == 1 ? ",)" : ")";
            break;
          case JSeq::dict_items:
            open = "dict_items([";
            close = "])";
            break;
          case JSeq::dict_keys:
            open = "dict_keys([";
            close = "])";
            break;
          case JSeq::dict_values:
            open = "dict_values([";
            close = "])";
            break;
          case JSeq::range: out.add(L.tag); return true;
          case JSeq::generator: return fail("unsupported construct: printing a generator (add |list)");
          default: break;
        }
        if (std::find(repr_stack_.begin(), repr_stack_.end(), v.l.get()) != repr_stack_.end()) {
          out.add(L.kind == JSeq::tuple ? "(...)" : "[...]");  // Python's marker for a container inside itself
          return true;
        }
        repr_stack_.push_back(v.l.get());
        out.add(open);
        for (size_t k = 0; k < L.items.size(); k++) {
          if (k) out.add(", ");
          if (!repr(L.items[k], out, depth + 1)) return false;
        }
        out.add(close);
        repr_stack_.pop_back();
        return true;
      }
      case JValue::T::dict:
      case JValue::T::ns: {
        if (v.t == JValue::T::ns) out.add("<Namespace ");
        if (std::find(repr_stack_.begin(), repr_stack_.end(), v.m.get()) != repr_stack_.end()) {
          out.add(v.t == JValue::T::ns ? "{...}>" : "{...}");
          return true;
        }
        repr_stack_.push_back(v.m.get());
        out.add("{");
        bool first = true;
        for (const auto& kv : v.m->items) {
          if (!first) out.add(", ");
          first = false;
          if (!repr(kv.first, out, depth + 1)) return false;
          out.add(": ");
          if (!repr(kv.second, out, depth + 1)) return false;
        }
        out.add("}");
        if (v.t == JValue::T::ns) out.add(">");
        repr_stack_.pop_back();
        return true;
      }
      default: return to_str(v, out, depth);
    }
  }

  // ---- JSON (transformers' tojson: json.dumps with ensure_ascii=False by default) ----
  struct JsonOpts {
    bool ensure_ascii = false;
    bool indent_set = false;
    std::string indent;
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false;
  };
  void json_str(PText& out, const PText& s, bool ensure_ascii) {
    out.add('"');
    size_t i = 0;
    while (i < s.s.size()) {
      size_t b = i;
      uint32_t c = jcp_next(s.s, i);
      bool content = s.content_in(b, i);
      switch (c) {
        case '"': out.add("\\\"", content); continue;
        case '\\': out.add("\\\\", content); continue;
        case '\n': out.add("\\n", content); continue;
        case '\r': out.add("\\r", content); continue;
        case '\t': out.add("\\t", content); continue;
        case '\b': out.add("\\b", content); continue;
        case '\f': out.add("\\f", content); continue;
        default: break;
      }
      if (c < 0x20) {
        out.add(strf("\\u%04x", c), content);
      } else if (ensure_ascii && c >= 0x7F) {
        if (c >= 0x10000) {
          uint32_t v = c - 0x10000;
          out.add(strf("\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)), content);
        } else {
          out.add(strf("\\u%04x", c), content);
        }
      } else {
        out.add(std::string_view(s.s).substr(b, i - b), content);
      }
    }
    out.add('"');
  }
  bool json_key(const JValue& k, PText& key) {
    switch (k.t) {
      case JValue::T::string: key.add(*k.s); return true;
      case JValue::T::integer: key.add(std::to_string(k.i)); return true;
      case JValue::T::boolean: key.add(k.b ? "true" : "false"); return true;
      case JValue::T::none: key.add("null"); return true;
      case JValue::T::real: key.add(json_float(k.d)); return true;
      default: return fail(strf("keys must be str, int, float, bool or None, not %s", jv_type(k)));
    }
  }
  static std::string json_float(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return py_float_repr(d);
  }
  bool to_json(const JValue& v, PText& out, const JsonOpts& o, int level) {
    if (level > LLMINFER_JINJA_MAX_DEPTH) return fail("value nested too deeply for tojson (circular reference?)");
    if (!charge() || !check_len(out.s.size())) return false;
    auto newline = [&](int lv) {
      if (!o.indent_set) return;
      out.add("\n");
      for (int k = 0; k < lv; k++) out.add(o.indent);
    };
    switch (v.t) {
      case JValue::T::none: out.add("null"); return true;
      case JValue::T::boolean: out.add(v.b ? "true" : "false"); return true;
      case JValue::T::integer: out.add(std::to_string(v.i)); return true;
      case JValue::T::real: out.add(json_float(v.d)); return true;
      case JValue::T::string: json_str(out, *v.s, o.ensure_ascii); return true;
      case JValue::T::list: {
        if (v.l->kind == JSeq::dict_items || v.l->kind == JSeq::dict_keys || v.l->kind == JSeq::dict_values ||
            v.l->kind == JSeq::generator || v.l->kind == JSeq::range)
          return fail(strf("Object of type %s is not JSON serializable", jv_type(v)));
        if (v.l->items.empty()) {
          out.add("[]");
          return true;
        }
        out.add("[");
        for (size_t k = 0; k < v.l->items.size(); k++) {
          if (k) out.add(o.item_sep);
          newline(level + 1);
          if (!to_json(v.l->items[k], out, o, level + 1)) return false;
        }
        newline(level);
        out.add("]");
        return true;
      }
      case JValue::T::dict: {
        if (v.m->items.empty()) {
          out.add("{}");
          return true;
        }
        std::vector<size_t> order(v.m->items.size());
        for (size_t k = 0; k < order.size(); k++) order[k] = k;
        if (o.sort_keys) {
          std::vector<JValue> keys;
          for (const auto& kv : v.m->items) keys.push_back(kv.first);
          if (!sort_indices(keys, order, false)) return false;
        }
        out.add("{");
        bool first = true;
        for (size_t k : order) {
          const auto& kv = v.m->items[k];
          if (!first) out.add(o.item_sep);
          first = false;
          newline(level + 1);
          PText key;
          if (!json_key(kv.first, key)) return false;
          json_str(out, key, o.ensure_ascii);
          out.add(o.key_sep);
          if (!to_json(kv.second, out, o, level + 1)) return false;
        }
        newline(level);
        out.add("}");
        return true;
      }
      default: return fail(strf("Object of type %s is not JSON serializable", jv_type(v)));
    }
  }

  // Stable merge sort of indices by Python ordering of keys (safe with any comparison outcome).
  // eq_first: keys compare as one-item lists (Jinja2's |sort), so equal keys never reach "<".
  bool sort_indices(const std::vector<JValue>& keys, std::vector<size_t>& idx, bool reverse, bool eq_first = false) {
    size_t n = idx.size();
    if (!charge(n * 4 + 1)) return false;
    std::vector<size_t> tmp(n);
    for (size_t width = 1; width < n; width *= 2) {
      for (size_t lo = 0; lo < n; lo += 2 * width) {
        size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
        size_t a = lo, b = mid, o = lo;
        while (a < mid && b < hi) {
          bool less = false;
          // stable: take from the right run only when it is strictly before the left one
          if (eq_first && py_eq(keys[idx[a]], keys[idx[b]])) {
            less = false;
          } else if (reverse) {
            if (!py_less(keys[idx[a]], keys[idx[b]], less)) return false;
          } else {
            if (!py_less(keys[idx[b]], keys[idx[a]], less)) return false;
          }
          tmp[o++] = less ? idx[b++] : idx[a++];
        }
        while (a < mid) tmp[o++] = idx[a++];
        while (b < hi) tmp[o++] = idx[b++];
      }
      idx.swap(tmp);
    }
    return true;
  }

  // ---- builtins (38_jinja_builtins.hpp) ----
  JValue eval_filter(const JNode* n, const SP& sc, const JValue* subject);
  JValue eval_test(const JNode* n, const SP& sc);
  JValue apply_filter(const std::string& name, const JValue& v, const JArgs& args, const SP& sc);
  // A filter's handler gets its call: the name (a family of filters shares a handler), the value,
  // the arguments, the scope (map() runs filters in it) and "filter 'name'" for argument errors.
  struct FilterCall {
    const std::string& name;
    const JValue& v;
    const JArgs& args;
    const SP& sc;
    std::string what;
  };
  bool soft_str(const JValue& x, PText& t, bool& markup);
  bool sort_key(const JValue& item, const JValue* attribute, bool case_sensitive, JValue& key);
  JValue filter_abs(const FilterCall& c);
  JValue filter_attr(const FilterCall& c);
  JValue filter_batch(const FilterCall& c);
  JValue filter_case(const FilterCall& c);
  JValue filter_center(const FilterCall& c);
  JValue filter_default(const FilterCall& c);
  JValue filter_dictsort(const FilterCall& c);
  JValue filter_escape(const FilterCall& c);
  JValue filter_first_last(const FilterCall& c);
  JValue filter_float(const FilterCall& c);
  JValue filter_format(const FilterCall& c);
  JValue filter_indent(const FilterCall& c);
  JValue filter_int(const FilterCall& c);
  JValue filter_items(const FilterCall& c);
  JValue filter_join(const FilterCall& c);
  JValue filter_length(const FilterCall& c);
  JValue filter_list(const FilterCall& c);
  JValue filter_map(const FilterCall& c);
  JValue filter_min_max(const FilterCall& c);
  JValue filter_replace(const FilterCall& c);
  JValue filter_reverse(const FilterCall& c);
  JValue filter_round(const FilterCall& c);
  JValue filter_safe(const FilterCall& c);
  JValue filter_select(const FilterCall& c);
  JValue filter_sort(const FilterCall& c);
  JValue filter_string(const FilterCall& c);
  JValue filter_sum(const FilterCall& c);
  JValue filter_tojson(const FilterCall& c);
  JValue filter_trim(const FilterCall& c);
  JValue filter_truncate(const FilterCall& c);
  JValue filter_unique(const FilterCall& c);
  JValue filter_wordcount(const FilterCall& c);

  // A test's handler gets its call: the name (a family shares a handler), the value and the argument.
  bool run_test(const std::string& name, const JValue& v, const JArgs& args, bool& result);
  struct TestCall {
    const std::string& name;
    const JValue& v;
    const JValue* arg;  // the first argument, if any
  };
  bool test_arg(const TestCall& c);
  bool test_case(const TestCall& c, bool& r);
  bool test_compare(const TestCall& c, bool& r);
  bool test_divisible(const TestCall& c, bool& r);
  bool test_sameas(const TestCall& c, bool& r);

  JValue call_method(const JValue& self, const std::string& name, const JArgs& args);
  JValue dict_method(const JValue& self, const std::string& name, const JArgs& args, const std::string& what);
  JValue list_method(const JValue& self, const std::string& name, const JArgs& args, const std::string& what);
  // A str method's handler gets its call: the string, the name (a family of methods shares a
  // handler), the arguments and "str.name()" for argument errors.
  struct StrCall {
    const JValue& self;
    const PText& s;  // *self.s
    const std::string& name;
    const JArgs& args;
    const std::string& what;
    JValue ret(PText t) const { return jv_text(std::move(t), self.b); }  // Markup in, Markup out
  };
  bool str_arg(const StrCall& c, const JValue* x, const char* pname, std::string& out);
  JValue str_case(const StrCall& c);
  JValue str_find(const StrCall& c);
  JValue str_format(const StrCall& c);
  JValue str_is(const StrCall& c);
  JValue str_join(const StrCall& c);
  JValue str_justify(const StrCall& c);
  JValue str_partition(const StrCall& c);
  JValue str_remove_fix(const StrCall& c);
  JValue str_replace(const StrCall& c);
  JValue str_split(const StrCall& c);
  JValue str_splitlines(const StrCall& c);
  JValue str_starts_ends(const StrCall& c);
  JValue str_strip(const StrCall& c);

  JValue percent_format(const JValue& fmt, const JValue& args);
  struct PctSpec {  // a "%" conversion: %[(key)][flags][width][.prec]conv
    std::string flags, width, prec;
    bool has_prec = false;
    char conv = 0;
  };
  bool percent_spec(const std::string& fmt, size_t& p, PctSpec& sp);
  bool percent_str(const PctSpec& sp, const JValue& arg, bool mk, PText& piece);
  bool percent_num(const PctSpec& sp, const JValue& arg, PText& piece);
  bool format_field(const std::string& field, const JArgs& args, size_t& auto_idx, JValue& v);
  bool format_pad(const std::string& spec, bool number, PText& t);

  JValue attr_path(const JValue& item, const JValue& path, const JValue* def);
  static bool parse_py_int(std::string_view s, int base, int64_t& out);
  static bool parse_py_float(std::string_view s, double& out);

  const JProgram& prog_;
  JRenderOptions opt_;
  std::vector<std::weak_ptr<JDict>> namespaces_;
  enum class Flow : uint8_t { normal, brk, cont } flow_ = Flow::normal;
  bool failed_ = false;
  bool fold_ = false;                    // computing a constant expression (see eval_folded)
  bool impossible_ = false;              // ... which turned out not to be constant
  std::vector<const void*> repr_stack_;  // containers being printed (for "[...]" / "{...}")
  const JNode* print_root_ = nullptr;    // the expression of the {{ }} being printed
  uint32_t pos_ = 0;
  uint64_t steps_ = 0;
  uint64_t next_poll_ = 0;
  uintptr_t stack_base_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
