5572f47e3000-5572f4812000 r--p 00000000 fe:00 247101                     /usr/bin/bash
5572f4812000-5572f48d3000 r-xp 0002f000 fe:00 247101                     /usr/bin/bash
5572f48d3000-5572f490b000 r--p 000f0000 fe:00 247101                     /usr/bin/bash
5572f490b000-5572f490f000 r--p 00128000 fe:00 247101                     /usr/bin/bash
5572f490f000-5572f4918000 rw-p 0012c000 fe:00 247101                     /usr/bin/bash
5572f4918000-5572f4923000 rw-p 00000000 00:00 0 
5572fb85d000-5572fb8bc000 rw-p 00000000 00:00 0                          [heap]
7fc867d14000-7fc867d6b000 r--p 00000000 fe:00 320475                     /usr/lib/locale/C.utf8/LC_CTYPE
7fc867d6b000-7fc867d6c000 r--p 00000000 fe:00 320482                     /usr/lib/locale/C.utf8/LC_NUMERIC
7fc867d6c000-7fc867d6d000 r--p 00000000 fe:00 320485                     /usr/lib/locale/C.utf8/LC_TIME
7fc867d6d000-7fc867d6e000 r--p 00000000 fe:00 320474                     /usr/lib/locale/C.utf8/LC_COLLATE
7fc867d6e000-7fc867d6f000 r--p 00000000 fe:00 320480                     /usr/lib/locale/C.utf8/LC_MONETARY
7fc867d6f000-7fc867d70000 r--p 00000000 fe:00 320479                     /usr/lib/locale/C.utf8/LC_MESSAGES/SYS_LC_MESSAGES
7fc867d70000-7fc867d71000 r--p 00000000 fe:00 320483                     /usr/lib/locale/C.utf8/LC_PAPER
7fc867d71000-7fc867d72000 r--p 00000000 fe:00 320481                     /usr/lib/locale/C.utf8/LC_NAME
7fc867d72000-7fc867d75000 rw-p 00000000 00:00 0 
7fc867d75000-7fc867d9b000 r--p 00000000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fc867d9b000-7fc867ef1000 r-xp 00026000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fc867ef1000-7fc867f44000 r--p 0017c000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fc867f44000-7fc867f48000 r--p 001cf000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fc867f48000-7fc867f4a000 rw-p 001d3000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fc867f4a000-7fc867f57000 rw-p 00000000 00:00 0 
7fc867f57000-7fc867f66000 r--p 00000000 fe:00 333461                     /usr/lib/x86_64-linux-gnu/libtinfo.so.6.4
7fc867f66000-7fc867f77000 r-xp 0000f000 fe:00 333461                     /usr/lib/x86_64-linux-gnu/libtinfo.so.6.4
7fc867f77000-7fc867f85000 r--p 00020000 fe:00 333461                     /usr/lib/x86_64-linux-gnu/libtinfo.so.6.4
7fc867f85000-7fc867f89000 r--p 0002d000 fe:00 333461                     /usr/lib/x86_64-linux-gnu/libtinfo.so.6.4
7fc867f89000-7fc867f8a000 rw-p 00031000 fe:00 333461                     /usr/lib/x86_64-linux-gnu/libtinfo.so.6.4
7fc867f8a000-7fc867f8b000 r--p 00000000 fe:00 320473                     /usr/lib/locale/C.utf8/LC_ADDRESS
7fc867f8b000-7fc867f8c000 r--p 00000000 fe:00 320484                     /usr/lib/locale/C.utf8/LC_TELEPHONE
7fc867f8c000-7fc867f8d000 r--p 00000000 fe:00 320477                     /usr/lib/locale/C.utf8/LC_MEASUREMENT
7fc867f8d000-7fc867f94000 r--s 00000000 fe:00 332280                     /usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache
7fc867f94000-7fc867f95000 r--p 00000000 fe:00 320476                     /usr/lib/locale/C.utf8/LC_IDENTIFICATION
7fc867f95000-7fc867f97000 rw-p 00000000 00:00 0 
7fc867f97000-7fc867f9b000 r--p 00000000 00:00 0                          [vvar]
7fc867f9b000-7fc867f9d000 r--p 00000000 00:00 0                          [vvar_vclock]
7fc867f9d000-7fc867f9f000 r-xp 00000000 00:00 0                          [vdso]
7fc867f9f000-7fc867fa0000 r--p 00000000 fe:00 332383                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7fc867fa0000-7fc867fc6000 r-xp 00001000 fe:00 332383                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7fc867fc6000-7fc867fd0000 r--p 00027000 fe:00 332383                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7fc867fd0000-7fc867fd2000 r--p 00031000 fe:00 332383                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7fc867fd2000-7fc867fd4000 rw-p 00033000 fe:00 332383                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7ffe99850000-7ffe99871000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
