/* dwarf_seed.c - the DWARF fuzz target's seed: compiled with -g into the
 * dwarf corpus by tests/acceptance/test_fuzz.py, it describes structs
 * under the names erts uses (src/beam/fields.c), with anonymous members
 * and typedefs, and a function with a register variable like
 * process_main's I. */
typedef unsigned long Eterm;
struct process {
	struct {
		Eterm id;
		union {
			struct {
				void *reg;
			} alive;
		} u;
	} common;
	Eterm *htop, *stop, *frame_pointer;
	long fcalls;
	Eterm *heap, *hend;
	void *i;
	unsigned flags;
	const void *current;
};
typedef struct index_table {
	char pad[116];
	int entries;
	void **seg_table;
} IndexTable;
typedef struct atom {
	char pad[24];
	short len;
	unsigned char *name;
} Atom;
struct process proc;
IndexTable tab;
Atom atom;
long process_main(long *x)
{
	register long *I __asm__("rbx") = x;
	long s = 0;
	while (*I)
		s += *I++;
	return s;
}
