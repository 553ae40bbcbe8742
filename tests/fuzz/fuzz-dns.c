/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what the DNS forwarder reads from hostile peers (a
 * sandbox's query, an upstream's answer: src/runtime/dns-msg.c) and the
 * policy check of the name it finds (src/runtime/egress-policy.c),
 * checking what they promise, not only that they do not crash:
 *   - a question's name is lower case, at most DNSMSG_NAME_MAX bytes, its
 *     end inside the packet; a refusal built from it is no longer than it;
 *   - answers are at most the room given;
 *   - a name matching "*.example.com" ends in ".example.com" and is
 *     longer; an entry that parses formats to one that parses the same. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/runtime/dns-msg.h"
#include "src/runtime/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
        static struct egress_policy *p;
        if (!p) {
                p = malloc(sizeof(*p));
                if (!p)
                        abort();
                egress_policy_init(p);
                if (egress_policy_add(p, true, "*.example.com", NULL) < 0 ||
                    egress_policy_add(p, false, "bad.example.com", NULL) < 0)
                        abort();
        }
        /* The check reads any case and one trailing dot. */
        char low[EGRESS_NAME_MAX + 2];
        size_t n = strlen(name);
        if (n < sizeof(low)) {
                for (size_t i = 0; i <= n; i++)
                        low[i] = (char)tolower((unsigned char)name[i]);
                if (n && low[n - 1] == '.')
                        low[--n] = '\0';
                enum egress_verdict v = egress_check_name(p, name);
                if (v == EGRESS_ALLOWED && (n <= 12 || strcmp(low + n - 12, ".example.com") ||
                                            !strcmp(low, "bad.example.com")))
                        abort();
        }
        struct egress_entry e, again;
        char out[EGRESS_NAME_MAX + 8];
        if (egress_entry_parse(name, &e, NULL) == 0) {
                egress_entry_format(&e, out, sizeof(out));
                if (egress_entry_parse(out, &again, NULL) != 0 || again.kind != e.kind ||
                    strcmp(again.name, e.name) || again.net != e.net || again.prefix != e.prefix)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 65536)
                return 0;
        uint8_t *pkt = malloc(size ? size : 1);
        if (!pkt)
                return 0;
        memcpy(pkt, data, size);
        char name[DNSMSG_NAME_MAX + 1];
        uint16_t type;
        size_t end;
        if (dnsmsg_question(pkt, size, name, &type, &end) == 0) {
                size_t n = strlen(name);
                if (n > DNSMSG_NAME_MAX || end > size || end < DNSMSG_HEADER)
                        abort();
                for (size_t i = 0; i < n; i++)
                        if (isupper((unsigned char)name[i]))
                                abort();
                check_name(name);
                if (dnsmsg_refuse(pkt, end, DNSMSG_RCODE_REFUSED) > size ||
                    dnsmsg_rcode(pkt, end) != DNSMSG_RCODE_REFUSED)
                        abort();
                memcpy(pkt, data, size);
        }
        struct dnsmsg_addr a[8];
        size_t got = 0;
        if (dnsmsg_answers(pkt, size, a, 8, &got) == 0 && got > 8)
                abort();
        /* The bytes as an entry a client writes, too. */
        char text[300];
        size_t tl = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
        memcpy(text, data, tl);
        text[tl] = '\0';
        check_name(text);
        free(pkt);
        return 0;
}
