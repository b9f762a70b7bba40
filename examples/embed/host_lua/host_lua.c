/*
 * host_lua.c: a C program that hosts a Lua training script (the Lua bridge, ember_lua.h).
 * The program owns everything: the data it generates and the weights, whose memory is a
 * plain C array wrapped with em_from_blob. It opens a Lua state with Ember loaded, runs
 * train.lua (which returns a function), calls that function with its tensors, and reads the
 * trained weights straight from its own array: Lua trained them in place. The final loss
 * comes back as a tensor. Then it checks what it got.
 *
 *   host_lua [train.lua]        (default: train.lua in the current folder)
 *
 * Errors: every call is checked. A Lua error (in the script, or an Ember op failing there)
 * comes back from the bridge as -1 with em_last_error() holding the message, the script's
 * line and the Lua traceback; this program prints it with what it was doing and exits with
 * status 1.
 *
 * Ownership: a tensor pushed into Lua is shared; Lua takes a reference of its own and drops it
 * when its value is collected or the state closes. The C program releases its own references
 * as usual; em_lua_to_tensor gives it a new one. Build: examples/embed/README.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ember.h>
#include <ember_lua.h>

enum { N = 256, K = 3, STEPS = 400 };
static const float true_w[K] = {2.0f, -3.0f, 0.5f};
static const float true_b = 1.0f;

static lua_State *L; /* closed by fail too, so that a failure leaks nothing */

static void fail(const char *what) {
  fprintf(stderr, "host_lua: %s: %s\n", what, em_last_error());
  em_lua_close(L);
  exit(1);
}
static em_tensor *ok(em_tensor *t, const char *what) {
  if (t == NULL) fail(what);
  return t;
}
static void ok_rc(int rc, const char *what) {
  if (rc != 0) fail(what);
}

/* y = x w + b for x drawn from an LCG in [-1, 1): the same data everywhere. */
static void make_data(float *x, float *y) {
  uint32_t state = 2024;
  for (int i = 0; i < N; i++) {
    y[i] = true_b;
    for (int j = 0; j < K; j++) {
      state = state * 1664525u + 1013904223u;
      x[i * K + j] = (float)((state >> 8) / 8388608.0 - 1.0);
      y[i] += true_w[j] * x[i * K + j];
    }
  }
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : "train.lua";

  /* The data (copied into Ember's memory) and the weights (this program's own array). */
  static float x_data[N * K], y_data[N];
  static float weights[K + 1]; /* w then b, zero to start */
  make_data(x_data, y_data);
  int64_t x_sizes[2] = {N, K}, y_sizes[2] = {N, 1}, w_sizes[2] = {K, 1}, b_size = 1;
  em_tensor *x = ok(em_from_buffer(x_data, EM_FLOAT32, 2, x_sizes, EM_FLOAT32, 0), "x");
  em_tensor *y = ok(em_from_buffer(y_data, EM_FLOAT32, 2, y_sizes, EM_FLOAT32, 0), "y");
  em_tensor *w = ok(em_from_blob(weights, EM_FLOAT32, 2, w_sizes, NULL, NULL, NULL), "w");
  em_tensor *b = ok(em_from_blob(weights + K, EM_FLOAT32, 1, &b_size, NULL, NULL, NULL), "b");

  /* Lua with Ember loaded; the script returns its training function. */
  L = em_lua_open(NULL);
  if (L == NULL) fail("em_lua_open");
  ok_rc(em_lua_dostring(L, "return package.ember_lua_dir", "=where", 1), "where");
  printf("ember package: %s\n", lua_tostring(L, -1));
  lua_pop(L, 1);
  ok_rc(em_lua_dofile(L, script, 1), script);

  /* train(x, y, w, b, {steps = STEPS, lr = 0.05}) */
  ok_rc(em_lua_push_tensor(L, x), "push x");
  ok_rc(em_lua_push_tensor(L, y), "push y");
  ok_rc(em_lua_push_tensor(L, w), "push w");
  ok_rc(em_lua_push_tensor(L, b), "push b");
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, STEPS);
  lua_setfield(L, -2, "steps");
  lua_pushnumber(L, 0.05);
  lua_setfield(L, -2, "lr");
  ok_rc(em_lua_pcall(L, 5, 1), "train");
  em_tensor *loss = ok(em_lua_to_tensor(L, -1), "the loss train returned");
  lua_pop(L, 1);
  em_lua_close(L); /* Lua's references to x, y, w, b go with it */
  L = NULL;

  /* The weights, read from this program's array: Lua updated them in place. */
  double final_loss;
  ok_rc(em_item(loss, &final_loss), "loss");
  printf("trained in Lua: w = [%.4f, %.4f, %.4f], b = %.4f, loss %.2e\n", weights[0],
         weights[1], weights[2], weights[3], final_loss);
  int good = final_loss < 1e-4 && fabsf(weights[K] - true_b) < 0.01f;
  for (int j = 0; j < K; j++) good = good && fabsf(weights[j] - true_w[j]) < 0.01f;
  em_release(loss);
  em_release(x);
  em_release(y);
  em_release(w);
  em_release(b);
  if (!good) {
    fprintf(stderr, "host_lua: the weights did not reach w = [2, -3, 0.5], b = 1\n");
    return 1;
  }
  printf("host_lua: ok\n");
  return 0;
}
