#ifndef XB_VERSION_H
#define XB_VERSION_H
#define XB_VERSION "0.1.0"
#endif
