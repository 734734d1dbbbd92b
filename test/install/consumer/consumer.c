/* Uses the installed runtime: its ABI version, a library that cannot be
 * loaded (the status and tq_last_error's cause), then a kernel library
 * given on the command line. */
#include <tq/tq_runtime.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer KERNEL_LIBRARY\n");
    return 2;
  }
  printf("abi %u\n", tq_runtime_abi_version());
  tq_runtime *rt = NULL;
  tq_runtime_options_v0 options = {TQ_RUNTIME_OPTIONS_VERSION_0,
                                   sizeof options, "/nonexistent.so", 1, 0};
  tq_status status = tq_runtime_create(&options, NULL, &rt);
  printf("missing: %s: %s\n", tq_status_string(status), tq_last_error());
  if (status != TQ_STATUS_UNAVAILABLE || !strstr(tq_last_error(), "/nonexistent.so"))
    return 1;
  options.library_path = argv[1];
  status = tq_runtime_create(&options, NULL, &rt);
  printf("library: %s\n", tq_status_string(status));
  if (status != TQ_STATUS_OK)
    return 1;
  tq_runtime_destroy(rt);
  return 0;
}
