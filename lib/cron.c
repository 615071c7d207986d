/*
 * cron.c - the 5-field cron parser of DQ_PUSHOPT_CRON (see cron.h): minute
 * hour day-of-month month day-of-week; '*', numbers, ranges a-b, steps
 * * /n and a-b/n, lists, month names jan-dec and day names sun-sat (any
 * case), day of week 0 and 7 both Sunday.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cron.h"

/* One field's range, name and the names its values may have. */
typedef struct field_def {
    const char *name;            /* for messages */
    int lo, hi;                  /* values allowed in the text */
    const char *const *names;    /* names of lo.. (NULL: none) */
} field_def;

static const char *const month_names[] = {"jan", "feb", "mar", "apr",
                                          "may", "jun", "jul", "aug",
                                          "sep", "oct", "nov", "dec", NULL};
static const char *const day_names[] = {"sun", "mon", "tue", "wed",
                                        "thu", "fri", "sat", NULL};

static const field_def fields[5] = {
    {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},
    {"day of month", 1, 31, NULL},
    {"month", 1, 12, month_names},
    {"day of week", 0, 7, day_names},
};

/* Reads a value (digits or a name) at *p; advances *p.  -1 if none. */
static int read_value(const field_def *f, const char **p) {
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        int v = 0;
        while (isdigit((unsigned char)*s)) {
            if (v > 1000)
                return -1;
            v = v * 10 + (*s++ - '0');
        }
        *p = s;
        return v;
    }
    if (f->names != NULL) {
        for (int i = 0; f->names[i] != NULL; i++)
            if (strncasecmp(s, f->names[i], 3) == 0 &&
                !isalpha((unsigned char)s[3])) {
                *p = s + 3;
                return f->lo + i;
            }
    }
    return -1;
}

/* Parses one field (text of len bytes) into *bits; *star: it starts with
 * '*'. */
static int parse_field(int k, const char *text, size_t len, uint64_t *bits,
                       int *star, dq__err *err) {
    const field_def *f = &fields[k];
    char buf[DQ_CRON_TEXT_MAX + 1];
    memcpy(buf, text, len);
    buf[len] = '\0';
    *bits = 0;
    *star = buf[0] == '*';
    const char *p = buf;
    for (;;) {
        int a, b, step = 1, ranged = 0;
        if (*p == '*') {
            ranged = 1;
            a = f->lo;
            b = f->hi == 7 ? 6 : f->hi;
            p++;
        } else {
            if ((a = read_value(f, &p)) < 0)
                goto bad;
            b = a;
            if (*p == '-') {
                ranged = 1;
                p++;
                if ((b = read_value(f, &p)) < 0)
                    goto bad;
            }
            if (a < f->lo || a > f->hi || b < f->lo || b > f->hi)
                return dq__err_set(err, DQ_EINVAL,
                                   "cron: %s '%s' is out of range %d-%d",
                                   f->name, buf, f->lo, f->hi);
            if (a > b)
                return dq__err_set(err, DQ_EINVAL,
                                   "cron: %s range '%s' is reversed", f->name,
                                   buf);
        }
        if (*p == '/') {
            /* a step needs '*' or a range before it */
            if (!ranged)
                goto bad;
            p++;
            if (!isdigit((unsigned char)*p) || (step = read_value(f, &p)) < 1 ||
                step > f->hi - f->lo + 1)
                return dq__err_set(err, DQ_EINVAL,
                                   "cron: %s step in '%s' must be 1..%d",
                                   f->name, buf, f->hi - f->lo + 1);
        }
        for (int v = a; v <= b; v += step)
            *bits |= UINT64_C(1) << (k == 4 && v == 7 ? 0 : v);
        if (*p == '\0')
            return DQ_OK;
        if (*p != ',' || p[1] == '\0')
            goto bad;
        p++;
    }
bad:
    return dq__err_set(err, DQ_EINVAL, "cron: bad %s field '%s'", f->name,
                       buf);
}

/* Days in month m (1..12) in a leap year: the most it can have. */
static int max_days(int m) {
    static const int d[13] = {0, 31, 29, 31, 30, 31, 30,
                              31, 31, 30, 31, 30, 31};
    return d[m];
}

int dq__cron_parse(const char *text, dq__cron *out, dq__err *err) {
    if (text == NULL)
        return dq__err_set(err, DQ_ENULL, "cron: the expression is NULL");
    if (strlen(text) > DQ_CRON_TEXT_MAX)
        return dq__err_set(err, DQ_EINVAL,
                           "cron: the expression is longer than %d bytes",
                           DQ_CRON_TEXT_MAX);
    for (const char *s = text; *s; s++)
        if (!isalnum((unsigned char)*s) && strchr("*-/, \t", *s) == NULL)
            return dq__err_set(err, DQ_EINVAL,
                               "cron: unexpected character '%c' in '%s'", *s,
                               text);
    uint64_t bits[5];
    int star[5], k = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        const char *e = p;
        while (*e && *e != ' ' && *e != '\t')
            e++;
        if (k == 5)
            return dq__err_set(err, DQ_EINVAL,
                               "cron: '%s' has more than 5 fields (minute "
                               "hour day-of-month month day-of-week)",
                               text);
        int rc = parse_field(k, p, (size_t)(e - p), &bits[k], &star[k], err);
        if (rc != DQ_OK)
            return rc;
        k++;
        p = e;
    }
    if (k != 5)
        return dq__err_set(err, DQ_EINVAL,
                           "cron: '%s' has %d fields; it needs 5 (minute "
                           "hour day-of-month month day-of-week)",
                           text, k);
    dq__cron c = {bits[0], (uint32_t)bits[1], (uint32_t)bits[2],
                  (uint32_t)bits[3], (uint32_t)bits[4], !star[2] && !star[4]};
    /* Every date falls on every weekday some year, so the expression fires
     * unless no day of the month exists in any of its months (a day that
     * needs dom or dow always exists). */
    int fires = c.day_or;
    for (int m = 1; m <= 12 && !fires; m++)
        if (c.mon & (UINT32_C(1) << m))
            for (int d = 1; d <= max_days(m); d++)
                if (c.dom & (UINT32_C(1) << d))
                    fires = 1;
    if (!fires)
        return dq__err_set(err, DQ_EINVAL,
                           "cron: '%s' can never fire (no such day in its "
                           "months)",
                           text);
    *out = c;
    return DQ_OK;
}

/* Appends bits (values lo..hi) as "v,v,.." to buf at *len. */
static void put_list(uint64_t bits, int lo, int hi, char *buf, size_t size,
                     size_t *len) {
    int first = 1;
    for (int v = lo; v <= hi; v++)
        if (bits & (UINT64_C(1) << v)) {
            if (*len < size)
                *len += (size_t)snprintf(buf + *len, size - *len, "%s%d",
                                         first ? "" : ",", v);
            first = 0;
        }
    if (*len < size)
        *len += (size_t)snprintf(buf + *len, size - *len, ";");
}

size_t dq__cron_rule(const dq__cron *c, int tz_min, const char *text,
                     char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "c%d;", tz_min);
    put_list(c->min, 0, 59, buf, size, &len);
    put_list(c->hour, 0, 23, buf, size, &len);
    put_list(c->dom, 1, 31, buf, size, &len);
    put_list(c->mon, 1, 12, buf, size, &len);
    put_list(c->dow, 0, 6, buf, size, &len);
    if (len < size)
        len += (size_t)snprintf(buf + len, size - len, "%c;",
                                c->day_or ? 'o' : 'a');
    /* the text, blanks squeezed to one space */
    int blank = 0;
    for (const char *s = text; *s && len < size; s++) {
        if (*s == ' ' || *s == '\t') {
            blank = len > 0 && buf[len - 1] != ';';
            continue;
        }
        if (blank && len + 1 < size)
            buf[len++] = ' ';
        blank = 0;
        if (len + 1 < size)
            buf[len++] = *s;
        else
            len = size;
    }
    if (len >= size)
        return 0;
    buf[len] = '\0';
    return len;
}

void dq__repeat_text(const char *rule, size_t len, char *buf, size_t size) {
    char r[DQ_CRON_RULE_MAX];
    buf[0] = '\0';
    if (len == 0 || len >= sizeof(r))
        return;
    memcpy(r, rule, len);
    r[len] = '\0';
    if (r[0] == 'e') {
        long long every, start;
        if (sscanf(r, "e%lld;%lld", &every, &start) == 2)
            snprintf(buf, size, "every %lld ms from %lld", every, start);
        return;
    }
    if (r[0] == 'c') {
        /* the text is after the 7th ';' */
        const char *p = r;
        for (int k = 0; k < 7 && p != NULL; k++)
            if ((p = strchr(p, ';')) != NULL)
                p++;
        if (p != NULL)
            snprintf(buf, size, "cron %s tz %+d", p, atoi(r + 1));
    }
}
