/* An example library for fanout's native runtime (task.type: native). For each item (a file
 * path) it emits one row: the file's name and its first line in upper case. The ABI is
 * src/fanout/native/fanout_native.h; the job file beside this one runs it.
 *
 * Arguments (program_arguments, after the system ones) let the tests exercise failures:
 *   --fail-on <text>   fanout_run fails when an item's path contains <text>
 *   --sleep-ms <n>     each fanout_run sleeps n ms first (timeouts)
 *   --fail-init        fanout_init fails
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fanout/native/fanout_native.h"

static const char* fail_on = NULL;
static long sleep_ms = 0;
static char error_text[512];

uint32_t fanout_abi_version(void) { return FANOUT_NATIVE_ABI_VERSION; }

const char* fanout_last_error(void) { return error_text; }

int fanout_init(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--fail-on") == 0 && i + 1 < argc) {
      fail_on = argv[++i];
    } else if (strcmp(argv[i], "--sleep-ms") == 0 && i + 1 < argc) {
      sleep_ms = strtol(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--fail-init") == 0) {
      snprintf(error_text, sizeof error_text, "InitError: asked to fail (--fail-init)");
      return 1;
    }
  }
  return 0;
}

int64_t fanout_run(const fanout_batch* batch, fanout_emit_fn emit, void* emit_ctx) {
  if (sleep_ms > 0) {
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  char row[1024];
  for (size_t i = 0; i < batch->n_items; ++i) {
    const char* path = batch->items[i];
    if (fail_on != NULL && strstr(path, fail_on) != NULL) {
      snprintf(error_text, sizeof error_text, "ValueError: refusing %s (--fail-on %s)", path,
               fail_on);
      return -1;
    }
    const char* slash = strrchr(path, '/');
    int n = snprintf(row, sizeof row, "%s ", slash != NULL ? slash + 1 : path);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
      snprintf(error_text, sizeof error_text, "FileNotFoundError: cannot open %s", path);
      return -1;
    }
    if (n > 0 && (size_t)n < sizeof row && fgets(row + n, (int)(sizeof row - (size_t)n), f)) {
      n += (int)strcspn(row + n, "\r\n");
    }
    fclose(f);
    if (n < 0 || (size_t)n >= sizeof row) n = (int)sizeof row - 1;
    for (int k = 0; k < n; ++k) row[k] = (char)toupper((unsigned char)row[k]);
    if (emit(emit_ctx, row, (size_t)n) != 0) break;
  }
  return (int64_t)batch->n_items;
}

void fanout_shutdown(void) {}
