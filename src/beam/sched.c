/* sched.c - the VM's scheduler threads and their data
 * (erl_process.h: ErtsAlignedSchedulerData). */
#define _GNU_SOURCE
#include "xb/vm.h"
#include "xb/common.h"
#include "xb/tasks.h"

#include <stdio.h>
#include <stdlib.h>

char xb_vm_thread_kind(const struct xb_vm *vm, const char *comm, int *no)
{
	static const char kinds[3] = { 's', 'c', 'i' };
	for (int k = 0; k < 3; k++)
		if (vm->thread_fmt[k] && xb_thread_name_match(vm->thread_fmt[k], comm, no))
			return kinds[k];
	*no = 0;
	return 'o';
}

int xb_vm_threads(const struct xb_vm *vm, struct xb_vm_thread **out)
{
	struct xb_task *tasks;
	*out = NULL;
	int n = xb_tasks_list(vm->pid, &tasks);
	if (n < 0)
		return -1;
	*out = calloc(n ? (size_t)n : 1, sizeof(**out));
	if (!*out) {
		free(tasks);
		return xb_fail("out of memory");
	}
	for (int i = 0; i < n; i++) {
		(*out)[i].tid = tasks[i].tid;
		(*out)[i].no = 0;
		(*out)[i].kind = tasks[i].comm[0] ? xb_vm_thread_kind(vm, tasks[i].comm, &(*out)[i].no) : 'o';
	}
	free(tasks);
	return n;
}

void xb_vm_count_sched_threads(const struct xb_vm *vm, int n[3])
{
	n[0] = n[1] = n[2] = 0;
	struct xb_vm_thread *t;
	int nt = xb_vm_threads(vm, &t);
	for (int i = 0; i < nt; i++) {
		n[0] += t[i].kind == 's';
		n[1] += t[i].kind == 'c';
		n[2] += t[i].kind == 'i';
	}
	free(t);
}

int xb_vm_sched_data(struct xb_vm *vm, int no, uint64_t *addr)
{
	/* Both are set once at boot (erl_process.c init_scheduler_data). */
	uint64_t base = vm->sched_base, nsched = vm->sched_count;
	if (xb_off(vm, XB_F_SCHED_STRIDE) <= 0)
		return xb_fail("the release table has no scheduler data layout");
	if (!vm->sym.sched_data_ptr || (!vm->sym.no_schedulers && !nsched))
		return xb_fail("scheduler data not found");
	if (!base && ((!nsched && xb_read_u64(&vm->mem, vm->sym.no_schedulers, &nsched) < 0) ||
		      xb_read_u64(&vm->mem, vm->sym.sched_data_ptr, &base) < 0))
		return -1;
	if (base && nsched && nsched <= 4096) {
		vm->sched_base = base;
		vm->sched_count = nsched;
	}
	if (no < 1 || (uint64_t)no > nsched || nsched > 4096)
		return xb_fail("scheduler %d out of range (1..%llu)", no, (unsigned long long)nsched);
	*addr = base + (uint64_t)(no - 1) * (uint64_t)xb_off(vm, XB_F_SCHED_STRIDE);
	return 0;
}

uint64_t xb_vm_current_process_slot(struct xb_vm *vm, char kind, int no)
{
	uint64_t esdp;
	int64_t off = xb_off(vm, XB_F_SCHED_CURRENT_PROCESS); /* ErtsSchedulerData.current_process */
	if (no <= 0 || off < 0)
		return 0;
	int r = kind == 's' ? xb_vm_sched_data(vm, no, &esdp)
		: kind == 'c' || kind == 'i' ? xb_vm_dirty_sched_data(vm, kind, no, &esdp)
					     : -1;
	return r < 0 || (esdp + (uint64_t)off) % 8 ? 0 : esdp + (uint64_t)off;
}

int xb_vm_dirty_sched_data(struct xb_vm *vm, char kind, int no, uint64_t *addr)
{
	uint64_t ptr = kind == 'c' ? vm->sym.dirty_cpu_data_ptr : vm->sym.dirty_io_data_ptr, base;
	if (!ptr)
		return xb_fail("dirty scheduler data symbols not found");
	if (xb_off(vm, XB_F_SCHED_STRIDE) <= 0)
		return xb_fail("the release table has no scheduler data layout");
	if (no < 1 || no > 4096)
		return xb_fail("dirty scheduler %d out of range", no);
	if (xb_read_u64(&vm->mem, ptr, &base) < 0)
		return -1;
	*addr = base + (uint64_t)(no - 1) * (uint64_t)xb_off(vm, XB_F_SCHED_STRIDE);
	return 0;
}
