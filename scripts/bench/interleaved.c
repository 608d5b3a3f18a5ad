/*
 * Wall time of each command line, interleaved: every round runs each once,
 * in a new random order (fixed seed), so drift and a command's place in
 * the round hit all alike. posix_spawn + waitpid, stdio on /dev/null;
 * prints each command's median and 25th percentile in ms (BENCHMARKS.md,
 * item 1). No Python between the runs, unlike scripts/bench_router.py.
 *
 *   cc -O2 -o /tmp/interleaved scripts/bench/interleaved.c
 *   OPENCLAW_BIN=$PWD/fake-openclaw /tmp/interleaved 1000 \
 *     "$PWD/fake-openclaw agent --agent main --message hi" \
 *     "/usr/bin/timeout 60 $PWD/fake-openclaw agent --agent main --message hi" \
 *     "$PWD/clawbot_router -m hi" "$PWD/OLD/clawbot_router -m hi"
 *
 * A command line is split on spaces; give full paths.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

enum { MAX_COMMANDS = 64, MAX_WORDS = 32 };

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc - 2 > MAX_COMMANDS) {
    fprintf(stderr, "usage: %s ROUNDS COMMAND... (at most %d)\n", argv[0], MAX_COMMANDS);
    return 2;
  }
  int rounds = atoi(argv[1]), n = argc - 2;
  if (rounds < 1) return 2;
  char **commands[MAX_COMMANDS];
  for (int i = 0; i < n; i++) {
    char *line = strdup(argv[i + 2]);
    char **words = calloc(MAX_WORDS + 1, sizeof *words);
    int k = 0;
    for (char *w = strtok(line, " "); w && k < MAX_WORDS; w = strtok(NULL, " ")) words[k++] = w;
    commands[i] = words;
  }
  double *ms = calloc((size_t)rounds * n, sizeof *ms);
  posix_spawn_file_actions_t stdio;
  posix_spawn_file_actions_init(&stdio);
  posix_spawn_file_actions_addopen(&stdio, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&stdio, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&stdio, 2, "/dev/null", O_WRONLY, 0);
  int order[MAX_COMMANDS];
  for (int i = 0; i < n; i++) order[i] = i;
  srand(42);
  for (int r = 0; r < rounds; r++) {
    for (int i = n - 1; i > 0; i--) {
      int j = rand() % (i + 1), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (int q = 0; q < n; q++) {
      int i = order[q], status;
      struct timespec start, end;
      pid_t pid;
      clock_gettime(CLOCK_MONOTONIC, &start);
      if (posix_spawn(&pid, commands[i][0], &stdio, NULL, commands[i], environ)) {
        perror(commands[i][0]);
        return 1;
      }
      waitpid(pid, &status, 0);
      clock_gettime(CLOCK_MONOTONIC, &end);
      ms[(size_t)i * rounds + r] =
          (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
    }
  }
  for (int i = 0; i < n; i++) {
    double *x = ms + (size_t)i * rounds;
    qsort(x, rounds, sizeof *x, by_value);
    printf("median %.3f ms  p25 %.3f ms  %s\n", x[rounds / 2], x[rounds / 4], argv[i + 2]);
  }
  return 0;
}
