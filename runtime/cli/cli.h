/*
 * cli.h: the `ember` program's parts.
 *   main.c       options, the Lua state, scripts, -e, -l, EMBER_DEVICE
 *   interrupt.c  running Lua code with a traceback, and Ctrl-C (SIGINT) while it runs
 *   repl.c       the read-eval-print loop: chunks, continuation lines, `?name`, printing
 *   lineedit.c   reading lines: GNU readline (editing, completion) or plain stdin
 *   history.c    the persistent, bounded history file
 * Lua-side helpers (completion, help, result formatting) live in lua/ember/repl.lua.
 */
#ifndef EMBER_CLI_H
#define EMBER_CLI_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

/* ---- interrupt.c ---- */

/* Runs the function below nargs arguments on the stack like lua_pcall, with a traceback
 * handler, and with Ctrl-C turned into the Lua error "interrupted!" while it runs. On error the
 * message (with traceback) is left on the stack and the status returned. */
int cli_pcall(lua_State *L, int nargs, int nresults);
/* Prints the error message on top of the stack to stderr (prefixed with `prefix` when not NULL)
 * and pops it. Flushes stdout first so that output and errors appear in order. */
void cli_report(lua_State *L, const char *prefix);
/* While reading input: SIGINT only sets a flag (and interrupts a blocking read with EINTR). */
void cli_prompt_signals_on(void);
/* Takes the flag set by a Ctrl-C at the prompt: returns 1 (and clears it) if one came. */
int cli_prompt_interrupted(void);

/* ---- lineedit.c ---- */

typedef enum cli_read_status { CLI_READ_LINE, CLI_READ_EOF, CLI_READ_INTERRUPT } cli_read_status;

/* Chooses the line source: readline when stdin and stdout are terminals (and readline is
 * built in), else plain reads without prompts. `repl_ref` is a registry reference to the
 * ember.repl Lua module (LUA_NOREF if it did not load), used for completion. */
void cli_input_open(lua_State *L, int repl_ref);
/* 1 when the user is typing at a terminal (prompts and a banner are shown). */
int cli_input_interactive(void);
/* Reads one line (without its newline) into *line (malloc'd; the caller frees it).
 * CLI_READ_INTERRUPT: Ctrl-C at the prompt; the caller discards what it had. */
cli_read_status cli_read_line(const char *prompt, char **line);
/* Writes text where prompts go (the terminal), e.g. the banner. */
void cli_input_message(const char *text);
/* Records a complete entry (a chunk or a `?` command) in the history. */
void cli_input_remember(const char *entry);
void cli_input_close(void);

/* ---- history.c ---- */

enum { CLI_HISTORY_MAX = 1000 };

/* The history file: $EMBER_HISTORY if set (empty: no history), else ~/.ember_history. Returns
 * a malloc'd path or NULL. */
char *cli_history_path(void);
/* Calls add(entry) for each of the last `max` entries of the file, oldest first. */
void cli_history_load(const char *path, int max, void (*add)(const char *entry));
/* Appends one entry to the file, then trims the file to its last `max` entries. Returns 0, or
 * -1 when the file cannot be written (the REPL goes on without it). */
int cli_history_append(const char *path, const char *entry, int max);

/* ---- repl.c ---- */

/* The REPL: returns when input ends (Ctrl-D, or the end of piped stdin): the number of entries
 * that failed when the input was not a terminal, else 0. */
int cli_repl(lua_State *L);

#endif
