/*
 * gpufleet test double of NVIDIA's pyxis SPANK plugin: NOT the real pyxis.
 *
 * A real, minimal SPANK plugin built against Slurm's <slurm/spank.h>. It
 * registers pyxis' --container-image option in srun/salloc/sbatch and in
 * slurmstepd and, for a task started with it, reports the image it was asked
 * for and the enroot it would hand it to (`enroot version`), then lets the task
 * run on the host: no image is imported and no container is started. Plugin
 * arguments (pyxis.conf) are key=value pairs, as pyxis takes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

static char *container_image;

static int set_container_image(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (optarg == NULL || *optarg == '\0') {
		slurm_error("pyxis: --container-image: empty image name");
		return -1;
	}
	free(container_image);
	container_image = strdup(optarg);
	return container_image == NULL ? -1 : 0;
}

static struct spank_option options[] = {
	{"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	 "[pyxis] the image to use for the container filesystem (gpufleet test double: reported, not imported)",
	 1, 0, set_container_image},
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (strchr(av[i], '=') == NULL) {
			slurm_error("pyxis: plugin argument \"%s\" is not key=value", av[i]);
			return -1;
		}
	}
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
	case S_CTX_REMOTE:
		for (struct spank_option *o = options; o->name != NULL; o++)
			if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
				slurm_error("pyxis: cannot register --%s", o->name);
				return -1;
			}
		break;
	default:
		break;
	}
	return 0;
}

/* In the task, as the user, just before exec: its stderr goes back to srun. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char version[64] = "";
	FILE *enroot;

	(void)sp;
	(void)ac;
	(void)av;
	if (container_image == NULL)
		return 0;
	enroot = popen("enroot version 2>/dev/null", "r");
	if (enroot == NULL || fgets(version, sizeof(version), enroot) == NULL) {
		if (enroot != NULL)
			pclose(enroot);
		fprintf(stderr, "pyxis: enroot is not installed or does not answer (gpufleet test double)\n");
		return -1;
	}
	pclose(enroot);
	version[strcspn(version, "\n")] = '\0';
	fprintf(stderr, "pyxis: importing docker image: %s\n", container_image);
	fprintf(stderr, "pyxis: gpufleet test double " PYXIS_VERSION ": enroot %s found; no image imported, the task runs on the host\n",
		version);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(container_image);
	container_image = NULL;
	return 0;
}
