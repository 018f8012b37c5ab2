/* states.c - what a sampled VM thread was doing (see states.h). */
#define _GNU_SOURCE
#include "xb/states.h"
#include "xb/common.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

const char *const xb_state_names[XB_STATE_COUNT] = {
	"emulator", "nif", "bif", "gc", "copy", "port", "check_io", "aux", "scheduling", "other",
};

enum {
	FL_DONE = 1 << 0,     /* flags computed */
	FL_KERNEL = 1 << 1,
	FL_JIT = 1 << 2,      /* JIT code that is no Erlang function */
	FL_BEAM = 1 << 3,     /* in the VM's own binary */
	FL_SYSLIB = 1 << 4,   /* libc and friends: called by the VM and NIFs alike */
	FL_NIF_GLUE = 1 << 5, /* the VM calling a NIF */
	FL_BIF_GLUE = 1 << 6, /* the VM calling a BIF */
	FL_GC = 1 << 7,
	FL_COPY = 1 << 8,
	FL_PORT = 1 << 9,
	FL_CHECK_IO = 1 << 10,
	FL_AUX = 1 << 11,
	FL_NATIVE = 1 << 12,  /* a native (C) frame */
};

/* How the VM calls NIFs and BIFs: the JIT's shared fragments
 * (jit/x86/beam_asm_global.hpp.pl) and the C functions they, and the
 * dirty schedulers, go through (jit/beam_jit_common.cpp, erl_nif.c,
 * beam_common.c). */
static const char *const nif_glue[] = {
	"global::call_nif_shared", "global::call_nif_early", "global::dispatch_nif",
	"global::call_nif_yield_helper", "beam_jit_call_nif", "erts_call_nif_early", "erts_call_dirty_nif",
};
static const char *const bif_glue[] = {
	"global::call_bif_shared", "global::call_light_bif_shared", "global::dispatch_bif",
	"beam_jit_call_bif", "erts_call_dirty_bif",
};
/* Globs over native names (and JIT fragment names); the functions
 * --blame users name for the same work. */
static const char *const gc_names[] = { "*garbage_collect*", "erts_gc_*" };
static const char *const copy_names[] = { "copy_struct*", "copy_shallow*", "size_object*" };
static const char *const port_names[] = { "erts_port_task_execute", "erts_port_output*", "erts_port_control*",
					   "erts_port_call*" };
static const char *const check_io_names[] = { "erts_check_io*", "erts_poll_wait*" };
static const char *const aux_names[] = { "handle_aux_work" };
/* Tags of libraries that both the VM and NIFs call (so a frame there does
 * not make a NIF): the C library, zlib (crc32), the C++ runtime, vdso. */
static const char *const syslib_tags[] = {
	"[libc.so*", "[libc-*", "[libm.so*", "[libm-*", "[libpthread*", "[ld-linux*", "[libz.so*",
	"[libstdc++*", "[libgcc_s*", "[libdl*", "[librt*", "[libtinfo*", "[libutil*", "[[vdso]]",
	"[linux-vdso*",
};

static bool any(const char *const *globs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], name, 0) == 0)
			return true;
	return false;
}

#define ANY(list, name) any(list, XB_ARRAY_SIZE(list), name)

void xb_states_init(struct xb_states *c, const struct xb_vm *vm)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->beam_tag, sizeof(c->beam_tag), "[%s]", vm && vm->beam ? vm->beam->name : "beam.smp");
}

void xb_states_free(struct xb_states *c)
{
	free(c->flags);
	memset(c, 0, sizeof(*c));
}

static uint16_t flags_of(struct xb_states *c, const struct xb_profile *p, uint32_t id)
{
	if (id >= p->nnames)
		return FL_DONE;
	if (id >= c->n) {
		size_t n = p->nnames;
		if (xb_grow((void **)&c->flags, &c->cap, n, sizeof(*c->flags)) < 0)
			return FL_DONE;
		memset(c->flags + c->n, 0, (n - c->n) * sizeof(*c->flags));
		c->n = n;
	}
	uint16_t f = c->flags[id];
	if (f & FL_DONE)
		return f;
	const struct xb_fname *fn = &p->names[id];
	f = FL_DONE;
	if (fn->kind == XB_FK_KERNEL)
		f |= FL_KERNEL;
	if (fn->kind == XB_FK_JIT)
		f |= FL_JIT;
	if (fn->kind == XB_FK_NATIVE) {
		f |= FL_NATIVE;
		if (strcmp(fn->tag, c->beam_tag) == 0)
			f |= FL_BEAM;
		else if (ANY(syslib_tags, fn->tag))
			f |= FL_SYSLIB;
	}
	if (fn->kind == XB_FK_NATIVE || fn->kind == XB_FK_JIT) {
		for (size_t i = 0; i < XB_ARRAY_SIZE(nif_glue); i++)
			if (strcmp(fn->name, nif_glue[i]) == 0)
				f |= FL_NIF_GLUE;
		for (size_t i = 0; i < XB_ARRAY_SIZE(bif_glue); i++)
			if (strcmp(fn->name, bif_glue[i]) == 0)
				f |= FL_BIF_GLUE;
		if (ANY(gc_names, fn->name))
			f |= FL_GC;
		if (ANY(copy_names, fn->name))
			f |= FL_COPY;
		if (ANY(port_names, fn->name))
			f |= FL_PORT;
		if (ANY(check_io_names, fn->name))
			f |= FL_CHECK_IO;
		if (ANY(aux_names, fn->name))
			f |= FL_AUX;
	}
	c->flags[id] = f;
	return f;
}

void xb_classify(struct xb_states *c, const struct xb_profile *p, const struct xb_rsample *rs,
		 struct xb_sample_state *out)
{
	const struct xb_estack *es = rs->es;
	char kind = rs->t->kind;
	bool normal = kind == 's', dirty = kind == 'c' || kind == 'i';
	bool reached = rs->uw->stop == XB_UW_REACHED_ERLANG;
	uint16_t all = 0;
	int callee = -1, foreign = -1, nnat = 0;
	/* Native frames (after the kernel's), innermost first; the outermost
	 * C frame not VM glue is the function Erlang code called (callee);
	 * the outermost one outside the VM and the system libraries is where
	 * a NIF library starts (foreign). */
	for (uint32_t k = 0; k < rs->nnative && k < rs->n; k++) {
		uint16_t f = flags_of(c, p, rs->ids[k]);
		if (f & FL_KERNEL)
			continue;
		all |= f;
		if (!(f & FL_NATIVE))
			continue;
		nnat++;
		if (!(f & (FL_NIF_GLUE | FL_BIF_GLUE)))
			callee = (int)k;
		if (!(f & (FL_BEAM | FL_SYSLIB)))
			foreign = (int)k;
	}
	out->fn = -1;
	out->process = es->status == XB_ES_OK && (es->c_p || es->pid[0]);
	if (!out->process) {
		if (all & FL_PORT)
			out->state = XB_STATE_PORT;
		else if (all & FL_CHECK_IO)
			out->state = XB_STATE_CHECK_IO;
		else if (all & FL_AUX)
			out->state = XB_STATE_AUX;
		else if (all & FL_GC)
			out->state = XB_STATE_GC;
		else if (normal || dirty)
			out->state = XB_STATE_SCHEDULING;
		else
			out->state = XB_STATE_OTHER;
		return;
	}
	if (normal && !reached) {
		out->state = XB_STATE_OTHER;
		return;
	}
	if (normal && nnat == 0) {
		/* In Erlang code, or in the JIT's own glue code */
		out->state = all & FL_GC ? XB_STATE_GC : XB_STATE_EMULATOR;
		return;
	}
	/* Native code run for the process.  A NIF: called through the NIF
	 * glue, or (the interpreter calls NIFs directly) the function Erlang
	 * code called lies outside the VM; on a dirty scheduler, any frame of
	 * a library of its own. */
	bool nif = (all & FL_NIF_GLUE) || (normal && callee >= 0 && callee == foreign) || (dirty && foreign >= 0);
	if (nif) {
		out->state = XB_STATE_NIF;
		out->fn = foreign >= 0 ? foreign : callee;
	} else if (all & FL_GC) {
		out->state = XB_STATE_GC;
	} else if (all & FL_COPY) {
		out->state = XB_STATE_COPY;
	} else if (all & FL_PORT) {
		out->state = XB_STATE_PORT;
	} else {
		out->state = XB_STATE_BIF;
		out->fn = callee;
	}
}
