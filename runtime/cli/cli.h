/*
 * cli.h: the `ember` program's parts: locating the Lua package, running chunks with
 * tracebacks, and the REPL.
 */
#ifndef EMBER_CLI_H
#define EMBER_CLI_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

/* Runs the function on top of the stack with a traceback handler; on error prints the message
 * and traceback to stderr and returns non-zero. nresults as lua_pcall. */
int cli_pcall(lua_State *L, int nargs, int nresults);
/* Prints an error value left by cli_pcall (message plus traceback). */
void cli_report(lua_State *L, int status);
/* The REPL: returns when the user ends input (Ctrl-D). */
void cli_repl(lua_State *L);

#endif
