/* SPDX-License-Identifier: GPL-2.0 */
/* Prototypes of the forwarders in shim.c (declared for Rust in shim.rs). */
#ifndef GRAID_SHIM_H
#define GRAID_SHIM_H

#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>

blk_mode_t graid_blk_open_rw_excl(void);
gfp_t graid_gfp_noio(void);
u32 graid_crc32c(const void *p, size_t len);
blk_opf_t graid_req_fua(void);
blk_features_t graid_blk_feat_write_cache_fua(void);
blk_opf_t graid_req_op_read(void);
blk_opf_t graid_req_op_write(void);
blk_opf_t graid_req_op_discard(void);
blk_opf_t graid_req_op_superblock_write(void);
blk_opf_t graid_req_op_flush(void);
blk_opf_t graid_req_op_mask(void);
blk_opf_t graid_req_nowait(void);
blk_opf_t graid_req_preflush(void);
blk_opf_t graid_req_sync(void);
blk_features_t graid_blk_feat_nowait(void);
blk_status_t graid_blk_sts_ok(void);
blk_status_t graid_blk_sts_ioerr(void);
blk_status_t graid_blk_sts_notsupp(void);
dev_t graid_mkdev(unsigned int major, unsigned int minor);
unsigned int graid_major(dev_t dev);
unsigned int graid_minor(dev_t dev);
sector_t graid_bdev_nr_sectors(struct block_device *bdev);
dev_t graid_bdev_dev(struct block_device *bdev);
int graid_add_disk(struct gendisk *disk);
void *graid_blk_mq_rq_to_pdu(struct request *rq);
sector_t graid_blk_rq_pos(const struct request *rq);
unsigned int graid_blk_rq_bytes(const struct request *rq);
unsigned int graid_req_op(const struct request *rq);
bool graid_bdev_is_zoned(struct block_device *bdev);
struct queue_limits graid_queue_limits_start_update(struct request_queue *q);
void graid_queue_limits_cancel_update(struct request_queue *q);
struct workqueue_struct *graid_alloc_ordered_workqueue(const char *name, unsigned int flags);
unsigned int graid_memalloc_noio_save(void);
void graid_memalloc_noio_restore(unsigned int flags);
unsigned int graid_raw_smp_processor_id(void);
struct workqueue_struct *graid_alloc_unbound_workqueue(const char *name);
void graid_blk_plug_invalidate_ts(void);
void *graid_zero_page_address(void);
struct bio_vec graid_bio_iter_iovec(struct bio *bio, struct bvec_iter iter);
void graid_bio_advance_iter(struct bio *bio, struct bvec_iter *iter, unsigned int bytes);
void graid_memcpy_from_bvec(char *to, struct bio_vec *bvec);
void graid_memcpy_to_bvec(struct bio_vec *bvec, const char *from);
void graid_init_delayed_work(struct delayed_work *dwork, work_func_t fn);
bool graid_queue_delayed_work_ms(struct workqueue_struct *wq, struct delayed_work *dwork, unsigned int ms);
void graid_kick_lock_init(spinlock_t *lock);
void graid_kick_earlier(struct workqueue_struct *wq, struct delayed_work *dwork, unsigned int ms,
			spinlock_t *lock);
void graid_copy_racy(void *dst, const void *src, size_t len);
void graid_zero_racy(void *dst, size_t len);
bool graid_same_racy(const void *a, const void *b, size_t len);
void graid_module_get(void);
void graid_module_put(void);

/* Implemented in Rust (rust/blk_mq.rs). */
int graid_disk_open(struct gendisk *disk, blk_mode_t mode);
const struct block_device_operations *graid_disk_fops_ptr(void);
int graid_blk_mq_init_hctx(struct blk_mq_hw_ctx *hctx, void *data, unsigned int index);
struct bio *graid_bio_alloc(struct block_device *bdev, unsigned short nr_vecs, blk_opf_t opf, gfp_t gfp);
struct gendisk *graid_blk_mq_alloc_disk(struct blk_mq_tag_set *set, struct queue_limits *lim, void *queuedata);

#endif
