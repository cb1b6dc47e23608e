/*
 * common/hex: the value of one hexadecimal digit, for the text forms that
 * carry hex (a resume token's `_data`, RFC 3986 percent escapes).
 *
 * Thread: any (no state).
 */
#ifndef MCDC_COMMON_HEX_H
#define MCDC_COMMON_HEX_H

/* The value 0-15 of the hex digit c (0-9, a-f, A-F), or -1 for any other
 * character. */
static inline int mcdc_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
