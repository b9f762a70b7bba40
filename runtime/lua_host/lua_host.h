/*
 * lua_host.h: what the Lua bridge's files share (the files of runtime/lua_host, the library
 * libember_lua behind runtime/include/ember_lua.h). The bridge is C on the Lua C API; the
 * tensor hand-over itself is done in Lua by ember.host (lua/ember/host.lua), which owns the
 * FFI types, so that a tensor pushed from C is exactly the handle Ember's Lua code makes.
 */
#ifndef EMBER_LUA_HOST_H
#define EMBER_LUA_HOST_H

#include "ember_lua.h"

/* The registry field that holds the ember.host module of a state the bridge loaded. */
#define LH_REGISTRY_KEY "ember.host"

/* em_set_error("<fn>: <formatted message>"). Returns -1. */
int lh_error(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* lua_pcall with a traceback: on a Lua error, the message and traceback go into the thread's
 * Ember error as "<fn>: <message>\nstack traceback: ...", the error value is popped, and -1
 * is returned (the function and its nargs arguments are gone, as with lua_pcall). */
int lh_pcall(lua_State *L, const char *fn, int nargs, int nresults);

/* Checks L (not NULL, the bridge loaded into it, room for `slots` more values) and pushes
 * ember.host's function `name`. 0, or -1 with the error set and nothing pushed. */
int lh_push_helper(lua_State *L, const char *fn, const char *name, int slots);

#endif
