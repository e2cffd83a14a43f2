/* The C API from C99 (gcc -std=c99 -Wall -Wextra -Werror -pedantic), against the shared library
   (make libllminfer.so). Usage: test_capi MODEL REFERENCE
   MODEL is third_party/stories260K/stories260K.gguf, REFERENCE its llama2.c greedy output
   (stories260K.llama2c-reference.txt): the prompt ids and the 201 tokens llama2.c produced. Checks
   errors (codes and messages), tokenize/detokenize, greedy generation token for token against
   llama2.c, streaming with cancel, stop strings, sessions, and that every object is freed (run it
   under valgrind or ASan to see that). Prints one line per check; exit status 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llminfer.hpp"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* The "# TOKENS ..." line of the reference file. */
static size_t read_reference(const char* path, int32_t* out, size_t cap) {
  FILE* f = fopen(path, "r");
  char line[8192];
  size_t n = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "# TOKENS ", 9) == 0) {
      char* p = line + 9;
      char* end = NULL;
      for (;;) {
        long v = strtol(p, &end, 10);
        if (end == p || n >= cap) break;
        out[n++] = (int32_t)v;
        p = end;
      }
      break;
    }
  }
  fclose(f);
  return n;
}

struct stream {
  char text[4096];
  size_t len;
  int pieces;
  int cancel_after; /* 0: never */
};

static int on_piece(const char* piece, size_t len, void* user_data) {
  struct stream* s = (struct stream*)user_data;
  if (s->len + len < sizeof s->text) {
    memcpy(s->text + s->len, piece, len);
    s->len += len;
  }
  s->pieces++;
  return s->cancel_after == 0 || s->pieces < s->cancel_after;
}

int main(int argc, char** argv) {
  llminfer_model* model = NULL;
  llminfer_error* err = NULL;
  llminfer_load_options lo;
  llminfer_generate_options go;
  llminfer_result* res = NULL;
  int32_t ref[512];
  size_t n_ref;
  int rc;
  if (argc != 3) {
    fprintf(stderr, "usage: test_capi MODEL REFERENCE\n");
    return 2;
  }
  n_ref = read_reference(argv[2], ref, 512);
  CHECK(n_ref == 201);
  CHECK(strlen(llminfer_version()) > 0);

  /* errors: a missing file names it; NULL arguments are refused with the parameter's name */
  rc = llminfer_model_load("/nonexistent/model.gguf", strlen("/nonexistent/model.gguf"), NULL, &model, &err);
  CHECK(rc == LLMINFER_E_IO);
  CHECK(model == NULL);
  CHECK(err != NULL && llminfer_error_code(err) == LLMINFER_E_IO);
  CHECK(err != NULL && strstr(llminfer_error_message(err, NULL), "/nonexistent/model.gguf") != NULL);
  printf("missing file: %s\n", llminfer_error_message(err, NULL));
  llminfer_error_free(err);
  err = NULL;
  rc = llminfer_model_load(NULL, 3, NULL, &model, &err);
  CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && err && strstr(llminfer_error_message(err, NULL), "path"));
  llminfer_error_free(err);
  CHECK(strcmp(llminfer_errc_string(LLMINFER_E_IO), "cannot read the file") == 0);
  CHECK(strcmp(llminfer_stop_string(LLMINFER_STOP_MAX_TOKENS), "max_tokens") == 0);
  llminfer_error_free(NULL); /* every _free accepts NULL */
  llminfer_result_free(NULL);
  llminfer_model_free(NULL);
  llminfer_session_free(NULL);

  llminfer_load_options_init(&lo);
  lo.threads = 2;
  rc = llminfer_model_load(argv[1], strlen(argv[1]), &lo, &model, &err);
  CHECK(rc == LLMINFER_OK && model != NULL && err == NULL);
  if (!model) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], llminfer_error_message(err, NULL));
    return 1;
  }

  /* tokenize: llama2.c's prompt ids; detokenize gives the text back */
  {
    const char* text = "Once upon a time";
    int32_t* ids = NULL;
    size_t n = 0;
    char* back = NULL;
    size_t back_len = 0;
    rc = llminfer_tokenize(model, text, strlen(text), 1, 0, &ids, &n, &err);
    CHECK(rc == LLMINFER_OK && n == 5);
    CHECK(n == 5 && memcmp(ids, ref, 5 * sizeof(int32_t)) == 0);
    rc = llminfer_detokenize(model, ids + 1, n - 1, &back, &back_len, &err);
    CHECK(rc == LLMINFER_OK && back_len == strlen(text) && strcmp(back, text) == 0);
    llminfer_string_free(back);
    llminfer_tokens_free(ids);
    rc = llminfer_detokenize(model, ref, 1, NULL, NULL, &err); /* NULL out pointer */
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT);
    llminfer_error_free(err);
    {
      int32_t bad = 100000;
      rc = llminfer_detokenize(model, &bad, 1, &back, &back_len, &err);
      CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && back == NULL);
      CHECK(err && strstr(llminfer_error_message(err, NULL), "100000"));
      llminfer_error_free(err);
    }
  }

  /* greedy from llama2.c's prompt ids: its 196 tokens */
  llminfer_generate_options_init(&go);
  go.max_tokens = 196;
  rc = llminfer_generate_tokens(model, ref, 5, &go, &res, &err);
  CHECK(rc == LLMINFER_OK && res != NULL);
  if (res) {
    CHECK(res->n_tokens == 196);
    CHECK(res->n_tokens == 196 && memcmp(res->tokens, ref + 5, 196 * sizeof(int32_t)) == 0);
    CHECK(res->stop == LLMINFER_STOP_MAX_TOKENS);
    CHECK(res->prompt_tokens == 5);
    CHECK(res->text_len == strlen(res->text) && res->text_len > 100);
    CHECK(res->error_code == LLMINFER_OK && res->error_message_len == 0);
    printf("greedy: %zu tokens as llama2.c: %.60s...\n", res->n_tokens, res->text);
  }

  /* streaming: the pieces make the text; the callback cancels */
  {
    struct stream s;
    llminfer_result* r2 = NULL;
    memset(&s, 0, sizeof s);
    go.max_tokens = 40;
    go.on_piece = on_piece;
    go.user_data = &s;
    rc = llminfer_generate(model, "Once upon a time", 16, &go, &r2, &err);
    CHECK(rc == LLMINFER_OK && r2 != NULL);
    if (r2 && res) {
      CHECK(s.len == r2->text_len && memcmp(s.text, r2->text, s.len) == 0);
      CHECK(r2->n_tokens == 40 && memcmp(r2->tokens, res->tokens, 40 * sizeof(int32_t)) == 0);
    }
    llminfer_result_free(r2);
    r2 = NULL;
    memset(&s, 0, sizeof s);
    s.cancel_after = 3;
    rc = llminfer_generate(model, "Once upon a time", 16, &go, &r2, &err);
    CHECK(rc == LLMINFER_OK && r2 != NULL);
    if (r2) {
      CHECK(r2->stop == LLMINFER_STOP_CANCELLED);
      CHECK(s.pieces == 3);
      CHECK(r2->n_tokens < 40);
    }
    llminfer_result_free(r2);
    go.on_piece = NULL;
    go.user_data = NULL;
  }

  /* a stop string: the text ends before it */
  if (res) {
    llminfer_result* r3 = NULL;
    const char* stop = strstr(res->text, " the") ? " the" : "e";
    const char* stops[1];
    size_t lens[1];
    stops[0] = stop;
    lens[0] = strlen(stop);
    go.max_tokens = 196;
    go.stop = stops;
    go.stop_lens = lens;
    go.n_stop = 1;
    rc = llminfer_generate_tokens(model, ref, 5, &go, &r3, &err);
    CHECK(rc == LLMINFER_OK && r3 != NULL);
    if (r3) {
      CHECK(r3->stop == LLMINFER_STOP_STRING);
      CHECK(r3->text_len == (size_t)(strstr(res->text, stop) - res->text));
      CHECK(strncmp(r3->text, res->text, r3->text_len) == 0);
    }
    llminfer_result_free(r3);
    go.stop = NULL;
    go.stop_lens = NULL;
    go.n_stop = 0;
  }

  /* bad options are refused, naming the option */
  go.temperature = -1.0f;
  {
    llminfer_result* r4 = NULL;
    rc = llminfer_generate(model, "x", 1, &go, &r4, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && r4 == NULL);
    CHECK(err && strstr(llminfer_error_message(err, NULL), "temperature"));
    llminfer_error_free(err);
    go.temperature = 0.0f;
    go.n_stop = 2; /* with stop == NULL */
    rc = llminfer_generate(model, "x", 1, &go, &r4, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT);
    llminfer_error_free(err);
    go.n_stop = 0;
    rc = llminfer_generate(NULL, "x", 1, &go, &r4, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && err && strstr(llminfer_error_message(err, NULL), "model"));
    llminfer_error_free(err);
  }

  /* structured output: a grammar, a JSON Schema, logit bias and bans; a bad grammar names where */
  if (res) {
    llminfer_result* r6 = NULL;
    const char* grammar = "root ::= (\"yes\" | \"no\") \".\"";
    const char* schema =
        "{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}},"
        " \"required\": [\"ok\"], \"additionalProperties\": false}";
    const char* bad = "root ::= [z-a]";
    const char* unsupported = "{\"type\": \"object\", \"patternProperties\": {}}";
    char* gbnf = NULL;
    size_t gbnf_len = 0;
    int32_t ban[1];
    int32_t bias_ids[1];
    float bias_values[1];
    go.max_tokens = 40;
    go.temperature = 1.0f;
    go.seed = 5;
    go.grammar = grammar;
    go.grammar_len = strlen(grammar);
    rc = llminfer_generate(model, "Once upon a time", 16, &go, &r6, &err);
    CHECK(rc == LLMINFER_OK && r6 != NULL);
    if (r6) {
      CHECK(r6->stop == LLMINFER_STOP_EOS);
      CHECK(strcmp(r6->text, "yes.") == 0 || strcmp(r6->text, "no.") == 0);
      CHECK(r6->constraint_ms > 0.0);
      printf("grammar: %s (%.3f ms of constraint)\n", r6->text, r6->constraint_ms);
    }
    llminfer_result_free(r6);
    r6 = NULL;
    go.grammar = bad;
    go.grammar_len = strlen(bad);
    rc = llminfer_generate(model, "x", 1, &go, &r6, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && r6 == NULL);
    CHECK(err && strstr(llminfer_error_message(err, NULL), "line 1"));
    if (err) printf("bad grammar: %s\n", llminfer_error_message(err, NULL));
    llminfer_error_free(err);
    go.grammar = NULL;
    go.grammar_len = 0;
    go.json_schema = schema;
    go.json_schema_len = strlen(schema);
    rc = llminfer_generate(model, "Once upon a time", 16, &go, &r6, &err);
    CHECK(rc == LLMINFER_OK && r6 != NULL);
    if (r6) {
      size_t end = r6->text_len;
      while (end > 0 && (r6->text[end - 1] == ' ' || r6->text[end - 1] == '\n' || r6->text[end - 1] == '\t')) end--;
      CHECK(r6->stop == LLMINFER_STOP_EOS);
      CHECK(end > 0 && r6->text[0] == '{' && r6->text[end - 1] == '}' && strstr(r6->text, "\"ok\""));
      printf("json_schema: %s\n", r6->text);
    }
    llminfer_result_free(r6);
    r6 = NULL;
    rc = llminfer_json_schema_to_grammar(schema, strlen(schema), &gbnf, &gbnf_len, &err);
    CHECK(rc == LLMINFER_OK && gbnf && gbnf_len == strlen(gbnf) && strstr(gbnf, "root ::="));
    llminfer_string_free(gbnf);
    rc = llminfer_json_schema_to_grammar(unsupported, strlen(unsupported), &gbnf, &gbnf_len, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && gbnf == NULL && err &&
          strstr(llminfer_error_message(err, NULL), "patternProperties"));
    llminfer_error_free(err);
    go.json_schema = NULL;
    go.json_schema_len = 0;
    /* greedy: banning llama2.c's first token changes the first token; a large bias picks one */
    go.temperature = 0.0f;
    go.max_tokens = 3;
    ban[0] = ref[5];
    go.banned_tokens = ban;
    go.n_banned_tokens = 1;
    rc = llminfer_generate_tokens(model, ref, 5, &go, &r6, &err);
    CHECK(rc == LLMINFER_OK && r6 && r6->n_tokens == 3 && r6->tokens[0] != ref[5]);
    llminfer_result_free(r6);
    r6 = NULL;
    go.banned_tokens = NULL;
    go.n_banned_tokens = 0;
    bias_ids[0] = ref[20];
    bias_values[0] = 100.0f;
    go.logit_bias_ids = bias_ids;
    go.logit_bias_values = bias_values;
    go.n_logit_bias = 1;
    rc = llminfer_generate_tokens(model, ref, 5, &go, &r6, &err);
    CHECK(rc == LLMINFER_OK && r6 && r6->n_tokens == 3 && r6->tokens[0] == ref[20]);
    llminfer_result_free(r6);
    r6 = NULL;
    go.logit_bias_values = NULL; /* with n_logit_bias 1 */
    rc = llminfer_generate_tokens(model, ref, 5, &go, &r6, &err);
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && err && strstr(llminfer_error_message(err, NULL), "logit_bias"));
    llminfer_error_free(err);
    go.logit_bias_ids = NULL;
    go.n_logit_bias = 0;
  }

  /* a session: two turns, the second reuses the cache */
  {
    llminfer_session* s = NULL;
    llminfer_result* r5 = NULL;
    rc = llminfer_session_new(model, &s, &err);
    CHECK(rc == LLMINFER_OK && s != NULL);
    llminfer_model_free(model); /* the session keeps the weights alive */
    model = NULL;
    go.max_tokens = 12;
    CHECK(llminfer_session_add(s, "user", 4, "Tell me a story.", 16, &err) == LLMINFER_OK);
    rc = llminfer_session_reply(s, &go, &r5, &err);
    CHECK(rc == LLMINFER_OK && r5 != NULL);
    if (r5) CHECK(r5->n_tokens > 0 && r5->prompt_tokens_reused == 0);
    llminfer_result_free(r5);
    CHECK(llminfer_session_message_count(s) == 2);
    CHECK(llminfer_session_cached_tokens(s) > 0);
    CHECK(llminfer_session_add(s, "user", 4, "More.", 5, &err) == LLMINFER_OK);
    r5 = NULL;
    rc = llminfer_session_reply(s, &go, &r5, &err);
    CHECK(rc == LLMINFER_OK && r5 != NULL);
    if (r5) CHECK(r5->prompt_tokens_reused > 0);
    llminfer_result_free(r5);
    CHECK(llminfer_session_add(s, NULL, 4, "x", 1, &err) == LLMINFER_E_INVALID_ARGUMENT);
    llminfer_error_free(err);
    llminfer_session_reset(s);
    CHECK(llminfer_session_message_count(s) == 0 && llminfer_session_cached_tokens(s) == 0);
    r5 = NULL;
    rc = llminfer_session_reply(s, &go, &r5, &err); /* nothing to reply to */
    CHECK(rc == LLMINFER_E_INVALID_ARGUMENT && r5 == NULL);
    llminfer_error_free(err);
    llminfer_session_free(s);
  }

  llminfer_result_free(res);
  llminfer_model_free(model);
  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
