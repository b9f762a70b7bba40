/*
 * ember_lua.h: hosting Lua scripts from C, with Ember tensors shared between the two (the Lua
 * bridge, libember_lua). A C program opens a LuaJIT state with the ember package loaded,
 * pushes its own tensors into it, runs a script, and takes tensors back:
 *
 *   lua_State *L = em_lua_open(NULL);                  // ember loaded, global `ember`
 *   if (L == NULL) die(em_last_error());
 *   if (em_lua_dofile(L, "train.lua", 1) != 0) die(em_last_error());   // returns a function
 *   em_lua_push_tensor(L, weights);                    // shared, not copied
 *   if (em_lua_pcall(L, 1, 1) != 0) die(em_last_error());
 *   em_tensor *loss = em_lua_to_tensor(L, -1);         // a new reference
 *   lua_pop(L, 1);
 *   ...
 *   em_release(loss);
 *   em_lua_close(L);
 *
 * Link with libember_lua, libember and LuaJIT (pkg-config ember-lua; CMake Ember::ember_lua).
 * docs/embedding.md, "The Lua bridge", is the guide.
 *
 * Ownership
 *  - A tensor pushed into Lua is the same tensor, not a copy: the Lua value takes a reference
 *    of its own (em_retain), dropped when Lua's garbage collector frees the value or the state
 *    closes. The caller keeps its reference and releases it whenever it likes. Writes from
 *    either side (Lua's in-place ops, x:copy_(...), an optimizer step; C's em_*_ ops, or the
 *    memory of an em_from_blob tensor) are seen by the other.
 *  - em_lua_to_tensor returns a new reference to the tensor a Lua value holds: the caller
 *    releases it with em_release; it stays valid after the Lua value is gone or the state is
 *    closed.
 *
 * Errors: functions returning int return 0, or -1 with em_last_error() set; those returning a
 * pointer return NULL with it set. A Lua error (a script's error(), a failed Ember op, a
 * syntax error) never escapes to the host as a longjmp or a panic: it comes back as -1 with a
 * message such as "lua_dofile: train.lua:12: add: shapes [3] and [4] cannot broadcast",
 * followed by the Lua stack traceback (cut to fit em_last_error's buffer). The message names
 * the bridge function (without its em_ prefix), as every Ember message does.
 *
 * Threads: a lua_State belongs to one thread at a time (Lua's rule). Separate states may run
 * on separate threads; the tensors they share follow the runtime's rules (docs/embedding.md,
 * "Threads").
 */
#ifndef EMBER_LUA_H
#define EMBER_LUA_H

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LuaJIT's header has no extern "C" of its own (C++ hosts include lua.hpp): inside ours. */
#include "lua.h"

/* A new LuaJIT state with the standard libraries and the ember package loaded (the global
 * `ember`, as the `ember` program gives scripts), or NULL with the error set. package_dir is
 * the folder that holds ember/init.lua; NULL finds it as the `ember` program does: relative
 * to libember_lua (the installed package, <prefix>/share/lua/5.1, or lua/ next to the build
 * folder), then the install prefix and the source tree it was built from. No environment
 * variable is needed. EMBER_DEVICE applies as in the `ember` program. The caller closes the
 * state with em_lua_close. */
EM_API lua_State *em_lua_open(const char *package_dir);

/* Loads the ember package into a state the host made itself (luaL_newstate and
 * luaL_openlibs done): the global `ember`, and what the bridge functions below need.
 * package_dir as for em_lua_open. 0, or -1 with the error set. */
EM_API int em_lua_load(lua_State *L, const char *package_dir);

/* Closes the state (lua_close): every tensor reference Lua held is dropped. NULL does
 * nothing. */
EM_API void em_lua_close(lua_State *L);

/* Pushes t onto L's stack as an ember tensor that shares t (no copy): the Lua value holds a
 * reference of its own; the caller's is untouched (borrowed). 0, or -1 with the error set and
 * nothing pushed. */
EM_API int em_lua_push_tensor(lua_State *L, em_tensor *t);

/* The tensor the Lua value at stack index `index` holds (negative: from the top, as in
 * Lua): a new reference that the caller releases. NULL with the error set when the value is
 * not an ember tensor ("lua_to_tensor: expected an ember tensor at stack index -1, got a
 * number"). The stack is left as it was. */
EM_API em_tensor *em_lua_to_tensor(lua_State *L, int index);

/* Runs the Lua file at path with nresults results left on the stack (LUA_MULTRET for all).
 * 0, or -1 with the error set (the file's error and its traceback) and the stack as it was. */
EM_API int em_lua_dofile(lua_State *L, const char *path, int nresults);

/* Runs the Lua code in `code`, as em_lua_dofile. chunkname names it in messages and
 * tracebacks, in Lua's convention ("=name", "@file.lua"); NULL uses the code itself. */
EM_API int em_lua_dostring(lua_State *L, const char *code, const char *chunkname, int nresults);

/* lua_pcall for the host: calls the function below the top nargs values with them, leaving
 * nresults results (LUA_MULTRET for all). 0, or -1 with the error set (the Lua error's
 * message and traceback) and the function and its arguments popped. */
EM_API int em_lua_pcall(lua_State *L, int nargs, int nresults);

#ifdef __cplusplus
}
#endif

#endif
