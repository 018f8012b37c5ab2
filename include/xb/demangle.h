/* demangle.h - C++ symbol names as people read them. */
#ifndef XB_DEMANGLE_H
#define XB_DEMANGLE_H

#include <stddef.h>

/* "_ZN19BeamModuleAssembler11emit_i_moveERK9ArgSourceRK11ArgRegister"
 * -> "BeamModuleAssembler::emit_i_move": demangled, without the parameter
 * list, qualifiers or clone suffixes (a profile row and a --blame pattern
 * read better without them; templates and namespaces are kept).  Returns
 * NAME itself when it is not a mangled C++ name, or when libstdc++'s
 * demangler is unavailable or refuses it; otherwise BUF. */
const char *xb_demangle(const char *name, char *buf, size_t len);

/* The trimming alone, in place (pure; exposed for unit tests). */
void xb_demangle_trim(char *s);

#endif
