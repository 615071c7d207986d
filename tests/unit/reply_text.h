/*
 * tests/unit/reply_text.h - a reply made from RESP text by hiredis's own
 * reply parser, for the white-box tests of the units that read replies.
 */
#ifndef DQ_TEST_REPLY_TEXT_H
#define DQ_TEST_REPLY_TEXT_H

#include <check.h>
#include <string.h>

#include <hiredis/hiredis.h>

/* The reply that RESP text resp parses to (free with freeReplyObject). */
static inline void *parse(const char *resp) {
    redisReader *rd = redisReaderCreate();
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    void *r = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    ck_assert_ptr_nonnull(r);
    redisReaderFree(rd);
    return r;
}

#endif
