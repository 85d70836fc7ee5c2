// SPDX-License-Identifier: GPL-2.0
/*
 * C half of graid's kernel support layer. Only what Rust cannot reach through bindgen:
 * static inline functions, function-like macros and __force-typed constants. No logic lives
 * here; each helper is a one-line forwarder declared in rust/shim.rs.
 */
#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/kdev_t.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/workqueue.h>
#include <linux/bvec.h>
#include <linux/crc32.h>
#include <linux/mm.h>
#include <linux/string.h>

#include "shim.h"

/* Constants with __force types (bindgen drops these macros). */
blk_mode_t graid_blk_open_rw_excl(void) { return BLK_OPEN_READ | BLK_OPEN_WRITE | BLK_OPEN_EXCL; }
gfp_t graid_gfp_noio(void) { return GFP_NOIO; }
/* CRC-32C with the usual inversions (the engine's `crc32c`), by the kernel's optimised code. */
u32 graid_crc32c(const void *p, size_t len) { return ~crc32c(~0U, p, len); }
blk_opf_t graid_req_fua(void) { return REQ_FUA; }
blk_features_t graid_blk_feat_write_cache_fua(void) { return BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA; }
blk_opf_t graid_req_op_read(void) { return REQ_OP_READ; }
blk_opf_t graid_req_op_write(void) { return REQ_OP_WRITE; }
blk_opf_t graid_req_op_discard(void) { return REQ_OP_DISCARD; }
blk_opf_t graid_req_op_superblock_write(void) { return REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA | REQ_SYNC | REQ_META; }
blk_opf_t graid_req_op_flush(void) { return REQ_OP_WRITE | REQ_PREFLUSH; }
blk_opf_t graid_req_op_mask(void) { return REQ_OP_MASK; }
blk_opf_t graid_req_nowait(void) { return REQ_NOWAIT; }
blk_opf_t graid_req_preflush(void) { return REQ_PREFLUSH; }
blk_opf_t graid_req_sync(void) { return REQ_SYNC; }
blk_features_t graid_blk_feat_nowait(void) { return BLK_FEAT_NOWAIT; }
blk_status_t graid_blk_sts_ok(void) { return BLK_STS_OK; }
blk_status_t graid_blk_sts_ioerr(void) { return BLK_STS_IOERR; }
blk_status_t graid_blk_sts_notsupp(void) { return BLK_STS_NOTSUPP; }

/* Static inlines and macros. */
dev_t graid_mkdev(unsigned int major, unsigned int minor) { return MKDEV(major, minor); }
unsigned int graid_major(dev_t dev) { return MAJOR(dev); }
unsigned int graid_minor(dev_t dev) { return MINOR(dev); }
sector_t graid_bdev_nr_sectors(struct block_device *bdev) { return bdev_nr_sectors(bdev); }
dev_t graid_bdev_dev(struct block_device *bdev) { return bdev->bd_dev; }
struct bio *graid_bio_alloc(struct block_device *bdev, unsigned short nr_vecs, blk_opf_t opf,
			    gfp_t gfp) { return bio_alloc(bdev, nr_vecs, opf, gfp); }
struct gendisk *graid_blk_mq_alloc_disk(struct blk_mq_tag_set *set, struct queue_limits *lim,
					void *queuedata) { return blk_mq_alloc_disk(set, lim, queuedata); }
int graid_add_disk(struct gendisk *disk) { return add_disk(disk); }
void *graid_blk_mq_rq_to_pdu(struct request *rq) { return blk_mq_rq_to_pdu(rq); }
sector_t graid_blk_rq_pos(const struct request *rq) { return blk_rq_pos(rq); }
unsigned int graid_blk_rq_bytes(const struct request *rq) { return blk_rq_bytes(rq); }
unsigned int graid_req_op(const struct request *rq) { return req_op(rq); }
bool graid_bdev_is_zoned(struct block_device *bdev) { return bdev_is_zoned(bdev); }
struct queue_limits graid_queue_limits_start_update(struct request_queue *q) { return queue_limits_start_update(q); }
void graid_queue_limits_cancel_update(struct request_queue *q) { queue_limits_cancel_update(q); }
struct workqueue_struct *graid_alloc_ordered_workqueue(const char *name, unsigned int flags) { return alloc_ordered_workqueue("%s", flags, name); }
unsigned int graid_memalloc_noio_save(void) { return memalloc_noio_save(); }
void graid_memalloc_noio_restore(unsigned int flags) { memalloc_noio_restore(flags); }
unsigned int graid_raw_smp_processor_id(void) { return raw_smp_processor_id(); }
struct workqueue_struct *graid_alloc_unbound_workqueue(const char *name) { return alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name); }
void graid_blk_plug_invalidate_ts(void) { blk_plug_invalidate_ts(); }
void *graid_zero_page_address(void) { return page_address(ZERO_PAGE(0)); }
struct bio_vec graid_bio_iter_iovec(struct bio *bio, struct bvec_iter iter) { return bio_iter_iovec(bio, iter); }
void graid_bio_advance_iter(struct bio *bio, struct bvec_iter *iter, unsigned int bytes) { bio_advance_iter(bio, iter, bytes); }
void graid_memcpy_from_bvec(char *to, struct bio_vec *bvec) { memcpy_from_bvec(to, bvec); }
void graid_memcpy_to_bvec(struct bio_vec *bvec, const char *from) { memcpy_to_bvec(bvec, from); }

/*
 * Copies and compares on pages a process may write at the same moment (the parity helper's
 * pinned pool, the ring's shared pages): plain memcpy/memset/memcmp, outside Rust's memory
 * model, where a racing writer can tear the bytes but cause nothing undefined on our side.
 * Whatever is read this way is untrusted (rust/racy.rs).
 */
void graid_copy_racy(void *dst, const void *src, size_t len) { memcpy(dst, src, len); }
void graid_zero_racy(void *dst, size_t len) { memset(dst, 0, len); }
bool graid_same_racy(const void *a, const void *b, size_t len) { return memcmp(a, b, len) == 0; }

/*
 * File operations of every graid disk: the owner, so an open disk pins the module, and an open
 * that refuses while the array stops (graid_disk_open, in rust/blk_mq.rs).
 */
static const struct block_device_operations graid_disk_fops = {
	.owner = THIS_MODULE,
	.open = graid_disk_open,
};
const struct block_device_operations *graid_disk_fops_ptr(void) { return &graid_disk_fops; }

/*
 * A reference on this module, one per running array (rust/module_ref.rs): while an array runs,
 * rmmod refuses (in use), as md's personality modules do, rather than take the array down.
 */
void graid_module_get(void) { __module_get(THIS_MODULE); }
void graid_module_put(void) { module_put(THIS_MODULE); }

/*
 * init_hctx of every graid disk: a lock class of our own for the flush queue's lock. A flush we
 * forward completes inside the member's flush completion, which holds the member's flush lock
 * while ours is taken; with one class for both lockdep reports recursive locking (nvme-loop
 * does the same).
 */
static struct lock_class_key graid_fq_lock_key;
int graid_blk_mq_init_hctx(struct blk_mq_hw_ctx *hctx, void *data, unsigned int index)
{
	blk_mq_hctx_set_fq_lock_class(hctx, &graid_fq_lock_key);
	return 0;
}
void graid_init_delayed_work(struct delayed_work *dwork, work_func_t fn) { INIT_DELAYED_WORK(dwork, fn); }
bool graid_queue_delayed_work_ms(struct workqueue_struct *wq, struct delayed_work *dwork, unsigned int ms) { return queue_delayed_work(wq, dwork, msecs_to_jiffies(ms)); }
/* One lock class for every worker's kick lock: none is ever taken inside another. */
void graid_kick_lock_init(spinlock_t *lock) { spin_lock_init(lock); }
/*
 * Makes @dwork run on @wq in @ms milliseconds, or sooner: a run already due earlier stands,
 * one due later is brought forward (queue_delayed_work alone leaves a pending timer as it is).
 * @lock serialises the callers, so none moves another's earlier deadline later. Any context.
 */
void graid_kick_earlier(struct workqueue_struct *wq, struct delayed_work *dwork, unsigned int ms,
			spinlock_t *lock)
{
	unsigned long delay = msecs_to_jiffies(ms), flags;

	spin_lock_irqsave(lock, flags);
	if (!queue_delayed_work(wq, dwork, delay) && timer_pending(&dwork->timer) &&
	    time_after(dwork->timer.expires, jiffies + delay))
		mod_delayed_work(wq, dwork, delay);
	spin_unlock_irqrestore(lock, flags);
}
