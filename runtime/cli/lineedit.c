/*
 * lineedit.c: where the REPL's lines come from.
 *
 * At a terminal (stdin and stdout both), GNU readline gives line editing, the history
 * (history.c keeps the file) and tab completion. The candidates come from Lua:
 * ember.repl.complete(text before the cursor) returns the full words, so the rules (globals,
 * table fields along __index chains, tensor methods) live in one readable place.
 *
 * Readline runs through its callback interface under pselect(), with SIGINT, SIGWINCH and
 * SIGTSTP blocked except inside pselect. A Ctrl-C at the prompt therefore always lands in
 * pselect, where interrupt.c's handler sets a flag and we drop the line at once (as Python's
 * REPL does); a Ctrl-Z gives the terminal back before stopping. Readline's own signal handlers
 * stay off (rl_catch_signals = 0), so they never fight ours.
 *
 * Otherwise (piped input, or a build without readline) lines are read with getline(), with a
 * prompt only when stdin is a terminal, so piped output carries no prompts or escape codes.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "cli.h"

#ifdef EMBER_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

static int use_readline;     /* readline is reading the lines */
static int interactive;      /* stdin is a terminal: show prompts */
static FILE *prompt_out;     /* where prompts and the banner go */
static char *plain_buf;      /* getline's buffer */
static size_t plain_cap;

/* ---- plain input --------------------------------------------------------------------------- */

static cli_read_status plain_read(const char *prompt, char **line) {
  if (interactive) {
    fputs(prompt, prompt_out);
    fflush(prompt_out);
  }
  fflush(stdout);
  for (;;) {
    if (cli_prompt_interrupted()) {
      if (interactive) fputs("\n", prompt_out);
      return CLI_READ_INTERRUPT;
    }
    errno = 0;
    ssize_t n = getline(&plain_buf, &plain_cap, stdin);
    if (n >= 0) {
      while (n > 0 && (plain_buf[n - 1] == '\n' || plain_buf[n - 1] == '\r')) plain_buf[--n] = '\0';
      *line = strdup(plain_buf);
      return *line ? CLI_READ_LINE : CLI_READ_EOF;
    }
    if (errno != EINTR) return CLI_READ_EOF;
    clearerr(stdin); /* a signal interrupted the read: see whether it was Ctrl-C */
  }
}

#ifdef EMBER_HAVE_READLINE

/* ---- completion ---------------------------------------------------------------------------- */

static lua_State *lua_for_completion;
static int repl_ref = LUA_NOREF;
static char **candidates;
static int n_candidates;

static void free_candidates(void) {
  for (int i = 0; i < n_candidates; i++) free(candidates[i]);
  free(candidates);
  candidates = NULL;
  n_candidates = 0;
}

/* Asks ember.repl.complete(text before the cursor) for the candidate words and whether to add
 * a space after a unique one (after a keyword, yes; after a table or a function, no: a '.', ':'
 * or '(' comes next). */
static void fetch_candidates(int end) {
  lua_State *L = lua_for_completion;
  free_candidates();
  rl_completion_append_character = '\0';
  if (L == NULL || repl_ref == LUA_NOREF) return;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, repl_ref);
  lua_getfield(L, -1, "complete");
  lua_pushlstring(L, rl_line_buffer, (size_t)end);
  if (lua_pcall(L, 1, 2, 0) == 0 && lua_istable(L, -2)) {
    int n = (int)lua_objlen(L, -2);
    candidates = n > 0 ? calloc((size_t)n, sizeof *candidates) : NULL;
    for (int i = 1; candidates != NULL && i <= n; i++) {
      lua_rawgeti(L, -2, i);
      const char *s = lua_tostring(L, -1);
      if (s != NULL && (candidates[n_candidates] = strdup(s)) != NULL) n_candidates++;
      lua_pop(L, 1);
    }
    const char *append = lua_tostring(L, -1);
    if (append != NULL) rl_completion_append_character = append[0];
  }
  lua_settop(L, top);
}

static char *next_candidate(const char *text, int state) {
  static int i;
  (void)text; /* the candidates already start with it */
  if (state == 0) i = 0;
  return i < n_candidates ? strdup(candidates[i++]) : NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)start;
  /* Inside a string literal, complete file names (readline's default), for dofile('...'). */
  if (rl_completion_quote_character != 0) return NULL;
  rl_attempted_completion_over = 1; /* never fall back to file names in code */
  fetch_candidates(end);
  if (n_candidates == 0) return NULL;
  return rl_completion_matches(text, next_candidate);
}

/* Everything but letters, digits and "_.:" ends a word, so `ember.zer` and `x:resh` are one
 * word each and the word is exactly what ember.repl.complete looks at. */
static const char word_breaks[] = " \t\n!\"#$%&'()*+,-/;<=>?@[\\]^`{|}~";

/* Whether the text before `point` ends inside a '...' or "..." string (escapes honoured). */
static int in_open_string(const char *line, int point) {
  char quote = 0;
  for (int i = 0; i < point && line[i]; i++) {
    if (quote && line[i] == '\\' && i + 1 < point) i++;
    else if (quote && line[i] == quote) quote = 0;
    else if (!quote && (line[i] == '"' || line[i] == '\'')) quote = line[i];
  }
  return quote != 0;
}

/* Inside a string the word is the file name typed so far: only quotes and blanks end it.
 * (With '/' as a break, readline would drop the '/' that follows the quote in "/tmp/x".) */
static char *word_break_hook(void) {
  static char in_string_breaks[] = " \t\n\"'";
  return in_open_string(rl_line_buffer, rl_point) ? in_string_breaks : NULL;
}

/* ---- reading ------------------------------------------------------------------------------- */

static char *got_line;
static int got;
static volatile sig_atomic_t resized, suspended;

static void on_sigwinch(int sig) {
  (void)sig;
  resized = 1;
}

static void on_sigtstp(int sig) {
  (void)sig;
  suspended = 1;
}

/* Ctrl-Z at the prompt: give the terminal back in its normal mode, stop, and after `fg` take
 * it again and redraw the line (what readline does when it owns the signals). */
static void suspend(void) {
  rl_cleanup_after_signal();
  struct sigaction dfl, ours;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGTSTP, &dfl, &ours);
  sigset_t tstp;
  sigemptyset(&tstp);
  sigaddset(&tstp, SIGTSTP);
  raise(SIGTSTP);                         /* pending while blocked ... */
  sigprocmask(SIG_UNBLOCK, &tstp, NULL);  /* ... the process stops here until SIGCONT */
  sigprocmask(SIG_BLOCK, &tstp, NULL);
  sigaction(SIGTSTP, &ours, NULL);
  rl_reset_after_signal();
  rl_forced_update_display();
}

static void on_line(char *line) {
  got_line = line;
  got = 1;
  /* Removed here, not after the loop: otherwise readline shows the next prompt at once, before
   * the chunk's output. */
  rl_callback_handler_remove();
}

/* Ctrl-C at the prompt: forget the line, restore the terminal, and move to a fresh line. */
static void drop_line(void) {
  rl_point = rl_end;
  rl_redisplay();
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_cleanup_after_signal();
  rl_callback_handler_remove();
  fputs("^C\n", rl_outstream);
  fflush(rl_outstream);
}

static cli_read_status readline_read(const char *prompt, char **line) {
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGWINCH);
  sigaddset(&block, SIGTSTP);
  sigprocmask(SIG_BLOCK, &block, &orig);
  /* Ctrl-Z is ours only while reading (running code stops the usual way), and only when it
   * was not ignored by whoever started us. */
  struct sigaction tstp, old_tstp;
  sigaction(SIGTSTP, NULL, &old_tstp);
  int catch_tstp = old_tstp.sa_handler != SIG_IGN;
  if (catch_tstp) {
    memset(&tstp, 0, sizeof tstp);
    tstp.sa_handler = on_sigtstp;
    sigemptyset(&tstp.sa_mask);
    sigaction(SIGTSTP, &tstp, NULL);
  }

  fflush(stdout);
  got = 0;
  got_line = NULL;
  rl_callback_handler_install(prompt, on_line);
  cli_read_status status = CLI_READ_LINE;
  int fd = fileno(rl_instream);
  while (!got) {
    if (cli_prompt_interrupted()) {
      drop_line();
      status = CLI_READ_INTERRUPT;
      break;
    }
    if (suspended) {
      suspended = 0;
      suspend();
    }
    if (resized) {
      resized = 0;
      rl_resize_terminal();
    }
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    /* SIGINT, SIGWINCH and SIGTSTP arrive only while pselect waits: no lost wake-up. */
    int r = pselect(fd + 1, &fds, NULL, NULL, NULL, &orig);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rl_callback_handler_remove();
      status = CLI_READ_EOF;
      break;
    }
    rl_callback_read_char();
  }
  if (catch_tstp) sigaction(SIGTSTP, &old_tstp, NULL);
  suspended = 0;
  sigprocmask(SIG_SETMASK, &orig, NULL);
  if (status != CLI_READ_LINE) return status;
  if (got_line == NULL) {
    fputs("\n", rl_outstream); /* Ctrl-D: leave the terminal on a fresh line */
    return CLI_READ_EOF;
  }
  *line = got_line;
  return CLI_READ_LINE;
}

/* ---- history ------------------------------------------------------------------------------- */

static char *history_file;
static int history_warned;

static void add_loaded_entry(const char *entry) { add_history(entry); }

static void history_open(void) {
  using_history();
  stifle_history(CLI_HISTORY_MAX);
  history_file = cli_history_path();
  cli_history_load(history_file, CLI_HISTORY_MAX, add_loaded_entry);
}

static void history_remember(const char *entry) {
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last != NULL && strcmp(last->line, entry) == 0) return; /* no runs of the same entry */
  add_history(entry);
  if (history_file != NULL && cli_history_append(history_file, entry, CLI_HISTORY_MAX) != 0 &&
      !history_warned) {
    history_warned = 1;
    fprintf(stderr, "ember: cannot write the history file %s: %s (history is not saved)\n",
            history_file, strerror(errno));
  }
}

static void readline_open(lua_State *L, int ref) {
  lua_for_completion = L;
  repl_ref = ref;
  rl_readline_name = "ember"; /* for $if ember in ~/.inputrc */
  rl_catch_signals = 0;
  rl_catch_sigwinch = 0;
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = word_breaks;
  rl_basic_word_break_characters = word_breaks;
  rl_completer_quote_characters = "\"'";
  rl_completion_word_break_hook = word_break_hook;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigwinch;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGWINCH, &sa, NULL);
  history_open();
}

static void readline_close(void) {
  free_candidates();
  clear_history();
  free(history_file);
  history_file = NULL;
  lua_for_completion = NULL;
  signal(SIGWINCH, SIG_DFL);
}

#endif /* EMBER_HAVE_READLINE */

/* ---- the interface ------------------------------------------------------------------------- */

void cli_input_open(lua_State *L, int ref) {
  interactive = isatty(STDIN_FILENO);
  prompt_out = isatty(STDOUT_FILENO) ? stdout : stderr;
#ifdef EMBER_HAVE_READLINE
  use_readline = interactive && isatty(STDOUT_FILENO);
  if (use_readline) readline_open(L, ref);
#else
  (void)L;
  (void)ref;
  use_readline = 0;
#endif
}

int cli_input_interactive(void) { return interactive; }

void cli_input_message(const char *text) {
  fputs(text, prompt_out);
  fflush(prompt_out);
}

cli_read_status cli_read_line(const char *prompt, char **line) {
  *line = NULL;
#ifdef EMBER_HAVE_READLINE
  if (use_readline) return readline_read(prompt, line);
#endif
  return plain_read(prompt, line);
}

void cli_input_remember(const char *entry) {
#ifdef EMBER_HAVE_READLINE
  if (use_readline && entry[0] != '\0') history_remember(entry);
#else
  (void)entry;
#endif
}

void cli_input_close(void) {
#ifdef EMBER_HAVE_READLINE
  if (use_readline) readline_close();
#endif
  free(plain_buf);
  plain_buf = NULL;
  plain_cap = 0;
}
