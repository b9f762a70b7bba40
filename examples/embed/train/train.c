/*
 * train.c: Ember from C, start to finish. A two-layer perceptron learns to tell apart three
 * interleaved spirals of points in the plane: forward with em_* ops, em_backward, an Adam step
 * per parameter. The trained weights go into a safetensors checkpoint, which is read back and
 * checked against the model in memory.
 *
 *   train [checkpoint.safetensors]      (default: spiral.safetensors)
 *
 * Errors: every call is checked. A failing Ember function returns NULL or -1 and leaves a
 * message for this thread in em_last_error(); this program prints it with what it was doing
 * and exits with status 1. (A library would return the error to its own caller instead.)
 *
 * Ownership: every em_tensor * returned by a function is a new reference, released here with
 * em_release when no longer needed; a tensor that an op recorded for autograd keeps what it
 * needs alive by itself. Build: see examples/embed/README.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ember.h>

enum { CLASSES = 3, PER_CLASS = 100, N = CLASSES * PER_CLASS, HIDDEN = 32, STEPS = 400 };

static void fail(const char *what) {
  fprintf(stderr, "train: %s: %s\n", what, em_last_error());
  exit(1);
}

/* Both check a call's result and name the call in the message. */
static em_tensor *ok(em_tensor *t, const char *what) {
  if (t == NULL) fail(what);
  return t;
}
static void ok_rc(int rc, const char *what) {
  if (rc != 0) fail(what);
}

/* The data: point i of class k lies on arm k of a spiral, with a little deterministic noise. */
static void make_spirals(float *x, int64_t *y) {
  uint32_t state = 12345;
  for (int k = 0; k < CLASSES; k++)
    for (int i = 0; i < PER_CLASS; i++) {
      int row = k * PER_CLASS + i;
      state = state * 1664525u + 1013904223u; /* an LCG: same data everywhere */
      double noise = ((state >> 8) / 16777216.0 - 0.5) * 0.3;
      double r = (double)i / PER_CLASS;
      double theta = k * 4.0 + 4.0 * i / PER_CLASS + noise;
      x[2 * row] = (float)(r * sin(theta));
      x[2 * row + 1] = (float)(r * cos(theta));
      y[row] = k;
    }
}

typedef struct model {
  em_tensor *w1, *b1, *w2, *b2;   /* [2, H], [H], [H, C], [C] */
} model;

static em_tensor **params(model *m, int i) {
  em_tensor **p[] = {&m->w1, &m->b1, &m->w2, &m->b2};
  return p[i];
}
static const char *const param_names[] = {"w1", "b1", "w2", "b2"};
enum { NPARAMS = 4 };

/* A parameter: uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)] (PyTorch's nn.Linear), a leaf that
 * requires grad. */
static em_tensor *parameter(int ndim, const int64_t *sizes, int64_t fan_in, int device) {
  em_tensor *p = ok(em_empty(ndim, sizes, EM_FLOAT32, device), "empty");
  double bound = 1.0 / sqrt((double)fan_in);
  ok_rc(em_uniform_(p, -bound, bound), "uniform_");
  ok_rc(em_set_requires_grad(p, 1), "set_requires_grad");
  return p;
}

/* logits = relu(x w1 + b1) w2 + b2 */
static em_tensor *forward(const model *m, const em_tensor *x) {
  em_tensor *pre = ok(em_addmm(m->b1, x, m->w1, 1.0, 1.0), "addmm (layer 1)");
  em_tensor *h = ok(em_unary(EM_RELU, pre), "relu");
  em_release(pre);
  em_tensor *logits = ok(em_addmm(m->b2, h, m->w2, 1.0, 1.0), "addmm (layer 2)");
  em_release(h);
  return logits;
}

/* The fraction of rows whose largest logit is their label. */
static double accuracy(const model *m, const em_tensor *x, const em_tensor *y) {
  int was = em_set_grad_enabled(0);
  em_tensor *logits = forward(m, x);
  em_tensor *pred = ok(em_argmax(logits, 1, 0), "argmax");
  em_tensor *hit = ok(em_binary(EM_EQ, pred, y), "eq");
  em_tensor *hitf = ok(em_to_dtype(hit, EM_FLOAT32), "to_dtype");
  em_tensor *mean = ok(em_reduce(EM_MEAN, hitf, 0, NULL, 0), "mean");
  double acc;
  ok_rc(em_item(mean, &acc), "item");
  em_release(logits), em_release(pred), em_release(hit), em_release(hitf), em_release(mean);
  em_set_grad_enabled(was);
  return acc;
}

/* The largest |a - b|. */
static double max_abs_diff(const em_tensor *a, const em_tensor *b) {
  em_tensor *d = ok(em_binary(EM_SUB, a, b), "sub");
  em_tensor *ad = ok(em_unary(EM_ABS, d), "abs");
  em_tensor *mx = ok(em_reduce(EM_AMAX, ad, 0, NULL, 0), "amax");
  double v;
  ok_rc(em_item(mx, &v), "item");
  em_release(d), em_release(ad), em_release(mx);
  return v;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "spiral.safetensors";
  int device = em_default_device(); /* the CPU unless EMBER_DEVICE says otherwise */
  em_manual_seed(7);

  static float xs[N * 2];
  static int64_t ys[N];
  make_spirals(xs, ys);
  em_tensor *x = ok(em_from_buffer(xs, EM_FLOAT32, 2, (int64_t[]){N, 2}, EM_FLOAT32, device),
                    "from_buffer (x)");
  em_tensor *y = ok(em_from_buffer(ys, EM_INT64, 1, (int64_t[]){N}, EM_INT64, device),
                    "from_buffer (y)");

  model m = {
      .w1 = parameter(2, (int64_t[]){2, HIDDEN}, 2, device),
      .b1 = parameter(1, (int64_t[]){HIDDEN}, 2, device),
      .w2 = parameter(2, (int64_t[]){HIDDEN, CLASSES}, HIDDEN, device),
      .b2 = parameter(1, (int64_t[]){CLASSES}, HIDDEN, device),
  };
  /* Adam's state: two running averages per parameter, zeros of its shape. */
  em_tensor *avg[NPARAMS], *avg_sq[NPARAMS];
  for (int i = 0; i < NPARAMS; i++) {
    const em_tensor *p = *params(&m, i);
    avg[i] = ok(em_zeros(p->ndim, p->sizes, EM_FLOAT32, device), "zeros");
    avg_sq[i] = ok(em_zeros(p->ndim, p->sizes, EM_FLOAT32, device), "zeros");
  }
  em_adam_options adam = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};

  double loss_value = 0;
  for (int step = 1; step <= STEPS; step++) {
    em_tensor *logits = forward(&m, x);
    em_tensor *loss = ok(em_cross_entropy(logits, y, NULL, -100, EM_REDUCTION_MEAN, 0.0),
                         "cross_entropy");
    ok_rc(em_backward(loss, NULL, 0, 0), "backward");
    ok_rc(em_item(loss, &loss_value), "item");
    em_release(logits);
    em_release(loss);

    /* The update is not part of the graph: grad mode off, as the step functions require. */
    int was = em_set_grad_enabled(0);
    adam.step = step;
    for (int i = 0; i < NPARAMS; i++) {
      em_tensor *p = *params(&m, i);
      em_tensor *g = ok(em_grad(p), "grad");
      ok_rc(em_adam_step_(p, g, avg[i], avg_sq[i], NULL, &adam), "adam_step_");
      em_release(g);
      ok_rc(em_set_grad(p, NULL), "set_grad"); /* zero_grad */
    }
    em_set_grad_enabled(was);
    if (step % 100 == 0) printf("step %3d  loss %.4f\n", step, loss_value);
  }
  double acc = accuracy(&m, x, y);
  printf("training accuracy %.3f\n", acc);
  if (acc < 0.9) {
    fprintf(stderr, "train: the model did not learn the spirals (accuracy %.3f)\n", acc);
    return 1;
  }

  /* Save, with the step count as metadata. */
  char steps[16];
  snprintf(steps, sizeof steps, "%d", STEPS);
  const char *keys[] = {"steps"}, *values[] = {steps};
  em_tensor *tensors[NPARAMS];
  for (int i = 0; i < NPARAMS; i++) tensors[i] = *params(&m, i);
  ok_rc(em_safetensors_save(path, NPARAMS, param_names, tensors, 1, keys, values),
        "safetensors_save");

  /* Read it back into a second model and check it against the first. */
  em_safetensors *f = em_safetensors_open(path);
  if (f == NULL) fail("safetensors_open");
  if (em_safetensors_count(f) != NPARAMS) {
    fprintf(stderr, "train: %s holds %lld tensors, expected %d\n", path,
            (long long)em_safetensors_count(f), NPARAMS);
    return 1;
  }
  if (em_safetensors_metadata_count(f) != 1 ||
      strcmp(em_safetensors_metadata_value(f, 0), steps) != 0) {
    fprintf(stderr, "train: %s lost its metadata\n", path);
    return 1;
  }
  model loaded;
  for (int i = 0; i < NPARAMS; i++) {
    int64_t at = em_safetensors_find(f, param_names[i]);
    if (at < 0) {
      fprintf(stderr, "train: %s has no tensor %s\n", path, param_names[i]);
      return 1;
    }
    em_tensor *cpu = ok(em_safetensors_tensor(f, at), "safetensors_tensor");
    *params(&loaded, i) = ok(em_to_device(cpu, device), "to_device");
    em_release(cpu);
    double diff = max_abs_diff(*params(&loaded, i), *params(&m, i));
    if (diff != 0) {
      fprintf(stderr, "train: %s differs from the model by %g\n", param_names[i], diff);
      return 1;
    }
  }
  em_safetensors_close(f);
  double acc_loaded = accuracy(&loaded, x, y);
  if (acc_loaded != acc) {
    fprintf(stderr, "train: the reloaded model scores %.3f, not %.3f\n", acc_loaded, acc);
    return 1;
  }
  printf("saved %s and read it back: same weights, same accuracy\n", path);

  for (int i = 0; i < NPARAMS; i++) {
    em_release(*params(&m, i));
    em_release(*params(&loaded, i));
    em_release(avg[i]);
    em_release(avg_sq[i]);
  }
  em_release(x);
  em_release(y);
  return 0;
}
