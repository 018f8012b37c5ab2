/* dwarf_patch_member.c - give a struct member an implausible offset in a
 * copy of a beam's DWARF: the hostile-DWARF fixture of
 * tests/acceptance/test_hostile.py (test_implausible_dwarf_offset_not_used).
 *
 *   dwarf_patch_member FILE STRUCT MEMBER VALUE
 *
 * Every definition of `struct STRUCT` in FILE's .debug_info (one per
 * compilation unit that includes its header) has the
 * DW_AT_data_member_location of its member MEMBER (with MEMBER "": the
 * struct's own DW_AT_byte_size) overwritten in place with VALUE, which must fit the attribute's constant form (data1, data2
 * or data4; elfutils reads them, we write them).  The file must have an
 * uncompressed .debug_info (our DWARF builds do).  Prints how many were
 * patched; exit 1 if none.  Built by the test with gcc -ldw -lelf
 * (Debian's libdw-dev), as the NIF workloads are. */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct patch {
	off_t at;
	unsigned width;
};

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s FILE STRUCT MEMBER VALUE\n", argv[0]);
		return 2;
	}
	const char *file = argv[1], *sname = argv[2], *mname = argv[3];
	char *end;
	errno = 0;
	unsigned long value = strtoul(argv[4], &end, 0);
	if (errno || *end) {
		fprintf(stderr, "bad VALUE %s\n", argv[4]);
		return 2;
	}
	elf_version(EV_CURRENT);
	int fd = open(file, O_RDONLY);
	if (fd < 0) {
		perror(file);
		return 1;
	}
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Dwarf *dw = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
	size_t fsize;
	char *base = elf ? elf_rawfile(elf, &fsize) : NULL;
	if (!dw || !base) {
		fprintf(stderr, "%s: no DWARF (%s)\n", file, dwarf_errmsg(-1));
		return 1;
	}
	struct patch *p = NULL;
	size_t np = 0, cap = 0;
	Dwarf_Off cu = 0, next;
	size_t hsize;
	while (dwarf_nextcu(dw, cu, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie, d, m;
		if (dwarf_offdie(dw, cu + hsize, &cudie) && dwarf_child(&cudie, &d) == 0) {
			do {
				Dwarf_Attribute a;
				const char *n = dwarf_diename(&d);
				if (dwarf_tag(&d) != DW_TAG_structure_type || !n || strcmp(n, sname) != 0 ||
				    dwarf_attr(&d, DW_AT_declaration, &a) || dwarf_child(&d, &m) != 0)
					continue;
				bool whole = !*mname; /* the struct's size: one round, on the struct */
				if (whole)
					m = d;
				do {
					const char *mn = dwarf_diename(&m);
					if (whole ? !dwarf_attr(&m, DW_AT_byte_size, &a)
						  : dwarf_tag(&m) != DW_TAG_member || !mn || strcmp(mn, mname) != 0 ||
							    !dwarf_attr(&m, DW_AT_data_member_location, &a))
						continue;
					unsigned form = dwarf_whatform(&a), width = form == DW_FORM_data1 ? 1
										 : form == DW_FORM_data2 ? 2
										 : form == DW_FORM_data4 ? 4 : 0;
					if (!width) {
						fprintf(stderr, "%s.%s: form 0x%x, not data1/2/4\n", sname, mname, form);
						return 1;
					}
					if (value >> (8 * width)) { /* (width <= 4: a defined shift) */
						fprintf(stderr, "%s.%s: %lu does not fit %u bytes\n", sname, mname, value,
							width);
						return 1;
					}
					/* the attribute's value, in the mapped file (an
					 * uncompressed section is read in place) */
					const unsigned char *v = (const unsigned char *)a.valp;
					if (v < (const unsigned char *)base || v + width > (const unsigned char *)base + fsize) {
						fprintf(stderr, "%s: .debug_info is not read in place (compressed?)\n", file);
						return 1;
					}
					if (np == cap) {
						cap = cap ? 2 * cap : 16;
						p = realloc(p, cap * sizeof(*p));
						if (!p)
							return 1;
					}
					p[np++] = (struct patch){ (off_t)(v - (const unsigned char *)base), width };
				} while (!whole && dwarf_siblingof(&m, &m) == 0);
			} while (dwarf_siblingof(&d, &d) == 0);
		}
		cu = next;
	}
	dwarf_end(dw);
	elf_end(elf);
	close(fd);
	if (!np) {
		fprintf(stderr, "%s: no struct %s with a member %s\n", file, sname, mname);
		return 1;
	}
	fd = open(file, O_WRONLY);
	if (fd < 0) {
		perror(file);
		return 1;
	}
	for (size_t i = 0; i < np; i++) {
		unsigned char le[4];
		for (unsigned k = 0; k < p[i].width; k++)
			le[k] = (unsigned char)(value >> (8 * k));
		if (pwrite(fd, le, p[i].width, p[i].at) != (ssize_t)p[i].width) {
			perror("pwrite");
			return 1;
		}
	}
	if (close(fd) != 0) {
		perror(file);
		return 1;
	}
	printf("%zu\n", np);
	free(p);
	return 0;
}
