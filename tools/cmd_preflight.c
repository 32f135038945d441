/* cmd_preflight.c — `bsk preflight`: what GPU is here, what it can do, what this build carries. */
#include <stdio.h>
#include "cli.h"

static void version3(char *buf, size_t n, int v)
{
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    else snprintf(buf, n, "none");
}

int cmd_preflight(int argc, char **argv)
{
    int json = 0, npos;
    cli_opt opts[] = {CLI_OPT_FLAG("json", &json, "print the facts as JSON")};
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "bsk preflight [--json]",
                       "Report the CUDA device (name, compute capability, SMs, memory, L2), the driver and runtime\n"
                       "versions, and the GPU architectures this build carries machine code for. Without a GPU it\n"
                       "says so and exits 0.",
                       NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;

    bsk_device_info info;
    bsk_status s = bsk_device_query(&info);
    if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_meta(&j, "bsk preflight");
        cli_json_str(&j, "status", bsk_status_string(s));
        cli_json_finish(&j);
        return s == BSK_SUCCESS || s == BSK_ERR_NO_DEVICE ? CLI_OK : CLI_FAIL;
    }
    char drv[16], rt[16];
    version3(drv, sizeof drv, info.driver_version);
    version3(rt, sizeof rt, info.runtime_version);
    printf("bsk %s\n", bsk_version_string());
    printf("build carries:      %s\n", info.arch_list);
    if (s == BSK_ERR_NO_DEVICE) {
        printf("GPU:                none usable (%s); the CPU backend will run\n", bsk_status_string(s));
        if (info.driver_version || info.runtime_version) printf("driver / runtime:   %s / %s\n", drv, rt);
        return CLI_OK;
    }
    if (s != BSK_SUCCESS) {
        fprintf(stderr, "bsk preflight: device query failed: %s\n", bsk_status_string(s));
        return CLI_FAIL;
    }
    printf("GPU:                %s\n", info.name);
    printf("compute capability: %d.%d%s\n", info.cc_major, info.cc_minor,
           info.cc_major == 9 && info.cc_minor == 0 ? " (Hopper: sm_90a kernels apply)" : "");
    printf("multiprocessors:    %d\n", info.multiprocessors);
    printf("memory:             %.1f GiB\n", (double)info.global_mem_bytes / 1073741824.0);
    printf("L2 cache:           %.1f MiB\n", (double)info.l2_bytes / 1048576.0);
    printf("driver / runtime:   %s / %s\n", drv, rt);
    if (info.driver_version && info.runtime_version && info.driver_version < info.runtime_version)
        printf("warning:            the driver is older than the runtime this build uses\n");
    return CLI_OK;
}
