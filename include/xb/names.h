/* names.h - how Erlang code names read to the people who wrote the code.
 *
 * The code map spells functions as the VM's own perf map does
 * ("M:F/A", atoms quoted as erts quotes them, erl_printf_term.c
 * print_atom_name).  Elixir modules are atoms 'Elixir.Foo.Bar'; an Elixir
 * engineer reads them as Foo.Bar.fun/arity (Exception.format_mfa/3 in
 * Elixir's lib/elixir/lib/exception.ex).  Pure string functions: names
 * come from the target's memory, so every output still escapes them. */
#ifndef XB_NAMES_H
#define XB_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* "'Elixir.Foo.Bar':baz/2" -> "Foo.Bar.baz/2";
 * "'Elixir.Foo':'-run/1-fun-0-'/1" -> "anonymous fn/1 in Foo.run/1";
 * "'Elixir.Foo'::codeHeader" -> "Foo::codeHeader";
 * "'Elixir.Foo':'valid?'/1" -> "Foo.valid?/1".
 * Also accepts the module unquoted ("Elixir.Foo.Bar:baz/2", as a user
 * types it).  Any other name (an Erlang module, a native symbol) is
 * returned unchanged.  Returns NAME or BUF. */
const char *xb_elixir_name(const char *name, char *buf, size_t len);

/* An atom as erts prints it: 'Elixir.Foo.Bar' -> "Foo.Bar" (a registered
 * name); anything else unchanged.  Returns ATOM or BUF. */
const char *xb_elixir_atom(const char *atom, char *buf, size_t len);

/* Does NAME mention an Elixir module (cheap test before converting)? */
bool xb_is_elixir_name(const char *name);

#endif
