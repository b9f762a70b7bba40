/*
 * formulas_attention.c: the autograd node of scaled_dot_product_attention.
 *
 * The node saves what the fused backward kernel needs: the [B, H, T, E] views of q, k and v
 * the forward kernel read, its output and log-sum-exp rows, and the float32 mask. Nothing of
 * size L x S is kept: the kernel recomputes the scores (and the dropout mask, from the Philox
 * stream the node records) tile by tile.
 *
 * The kernel does not record, so a graph of the backward (create_graph, double backward) is
 * refused with a clear error rather than given gradients that second derivatives would get
 * wrong.
 */
#include "../nn.h"
#include "expr.h"
#include "record.h"

static void pack_geom(em_node *node, const em_attn_geom *g) {
  int64_t *v = node->ints;
  v[0] = g->B, v[1] = g->Hq, v[2] = g->Hkv, v[3] = g->Tq, v[4] = g->Tk, v[5] = g->D;
  v[6] = g->Dv, v[7] = g->causal, v[8] = g->drop_below;
  v[9] = (int64_t)g->seed, v[10] = (int64_t)g->offset;
  node->n_ints = 11;
  node->scalars[0] = g->scale;
  node->scalars[1] = g->dropout_p;
}

static em_attn_geom unpack_geom(const em_node *node) {
  const int64_t *v = node->ints;
  em_attn_geom g = {.B = v[0], .Hq = v[1], .Hkv = v[2], .Tq = v[3], .Tk = v[4], .D = v[5],
                    .Dv = v[6], .causal = v[7] != 0, .drop_below = (uint32_t)v[8],
                    .seed = (uint64_t)v[9], .offset = (uint64_t)v[10],
                    .scale = node->scalars[0], .dropout_p = node->scalars[1]};
  return g;
}

/* A [B, H, T, E] gradient shaped like input i ([batch..., H, T, E]). */
static T to_input(const em_node *node, int i, T g4) {
  T r = g4 ? em_reshape(g4, node->inputs[i].ndim, node->inputs[i].sizes) : NULL;
  em_release(g4);
  return r;
}

static int attention_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  if (em_grad_enabled())
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "scaled_dot_product_attention: double backward (create_graph) "
                             "is not supported");
  const em_tensor *s[6];
  for (int i = 0; i < node->n_saved; i++)
    if ((s[i] = em_ag_saved(node, i)) == NULL) return -1;
  em_attn_geom geo = unpack_geom(node);
  em_tensor *gq = NULL, *gk = NULL, *gv = NULL;
  if (em_nn_attention_backward(g, s[0], s[1], s[2], s[3], s[4], node->n_saved > 5 ? s[5] : NULL,
                               &geo, &gq, &gk, &gv) != 0)
    return -1;
  return put3(node, gi, to_input(node, 0, gq), to_input(node, 1, gk), to_input(node, 2, gv));
}

int em_ag_record_attention(em_tensor *out, const em_tensor *query, const em_tensor *key,
                           const em_tensor *value, const em_tensor *q4, const em_tensor *k4,
                           const em_tensor *v4, const em_tensor *out4, const em_tensor *lse,
                           const em_tensor *mask4, const em_attn_geom *g) {
  const em_tensor *ins[3] = {query, key, value};
  em_node *node = em_ag_node_new("ScaledDotProductAttentionBackward", attention_backward, 3, ins);
  if (node == NULL) return -1;
  pack_geom(node, g);
  const em_tensor *keep[6] = {q4, k4, v4, out4, lse, mask4};
  for (int i = 0; i < (mask4 ? 6 : 5); i++)
    if (em_ag_save(node, keep[i]) != 0) {
      em_node_release(node);
      return -1;
    }
  return em_ag_set_output(out, node);
}
