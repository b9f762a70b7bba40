/*
 * fuzz_file.h: what the reader fuzz targets share.
 *
 * The readers take file paths, so each input is put in an in-memory file (memfd) and handed
 * over as /proc/self/fd/<n>: no disk traffic, and a regular file as the readers require.
 */
#ifndef EMBER_FUZZ_FILE_H
#define EMBER_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

/* A path whose file holds exactly data[0..size) (the same file, rewritten, on every call). */
const char *fuzz_file(const uint8_t *data, size_t size);
/* Sets the limits the targets run under: a gzip limit of 1 MiB, far below the 16 MiB
 * allocation that run.sh makes a finding, so only a size taken unchecked from a header (or
 * some other runaway) allocates that much. */
void fuzz_setup(void);

#endif
