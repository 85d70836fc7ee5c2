// SPDX-License-Identifier: GPL-2.0

//! Declarations of the forwarders in `shim.c`: static inlines, macros and `__force` constants
//! of the block layer that bindgen cannot export.

use kernel::bindings::{
    bio, bio_vec, bvec_iter, blk_features_t, block_device_operations, blk_mode_t, blk_mq_hw_ctx, blk_mq_tag_set, blk_opf_t, blk_status_t, block_device,
    delayed_work, dev_t, gendisk, gfp_t, queue_limits, request, request_queue, sector_t, spinlock_t, work_func_t, workqueue_struct,
};
use kernel::ffi::c_char;
use kernel::ffi::{c_int, c_uint, c_ushort, c_void};

#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn graid_blk_open_rw_excl() -> blk_mode_t;
    pub(crate) fn graid_gfp_noio() -> gfp_t;
    pub(crate) fn graid_crc32c(p: *const c_void, len: usize) -> u32;
    pub(crate) fn graid_req_fua() -> blk_opf_t;
    pub(crate) fn graid_blk_feat_write_cache_fua() -> blk_features_t;
    pub(crate) fn graid_req_op_read() -> blk_opf_t;
    pub(crate) fn graid_req_op_write() -> blk_opf_t;
    pub(crate) fn graid_req_op_discard() -> blk_opf_t;
    pub(crate) fn graid_req_op_superblock_write() -> blk_opf_t;
    pub(crate) fn graid_req_op_flush() -> blk_opf_t;
    pub(crate) fn graid_req_op_mask() -> blk_opf_t;
    pub(crate) fn graid_req_nowait() -> blk_opf_t;
    pub(crate) fn graid_req_preflush() -> blk_opf_t;
    pub(crate) fn graid_req_sync() -> blk_opf_t;
    pub(crate) fn graid_blk_feat_nowait() -> blk_features_t;
    pub(crate) fn graid_blk_sts_ok() -> blk_status_t;
    pub(crate) fn graid_blk_sts_ioerr() -> blk_status_t;
    pub(crate) fn graid_blk_sts_notsupp() -> blk_status_t;
    pub(crate) fn graid_mkdev(major: c_uint, minor: c_uint) -> dev_t;
    pub(crate) fn graid_major(dev: dev_t) -> c_uint;
    pub(crate) fn graid_minor(dev: dev_t) -> c_uint;
    pub(crate) fn graid_bdev_nr_sectors(bdev: *mut block_device) -> sector_t;
    pub(crate) fn graid_bdev_dev(bdev: *mut block_device) -> dev_t;
    pub(crate) fn graid_bio_alloc(
        bdev: *mut block_device,
        nr_vecs: c_ushort,
        opf: blk_opf_t,
        gfp: gfp_t,
    ) -> *mut bio;
    pub(crate) fn graid_blk_mq_alloc_disk(
        set: *mut blk_mq_tag_set,
        lim: *mut queue_limits,
        queuedata: *mut c_void,
    ) -> *mut gendisk;
    pub(crate) fn graid_add_disk(disk: *mut gendisk) -> c_int;
    pub(crate) fn graid_blk_mq_rq_to_pdu(rq: *mut request) -> *mut c_void;
    pub(crate) fn graid_blk_rq_pos(rq: *const request) -> sector_t;
    pub(crate) fn graid_blk_rq_bytes(rq: *const request) -> c_uint;
    pub(crate) fn graid_req_op(rq: *const request) -> c_uint;
    pub(crate) fn graid_bdev_is_zoned(bdev: *mut block_device) -> bool;
    pub(crate) fn graid_queue_limits_start_update(q: *mut request_queue) -> queue_limits;
    pub(crate) fn graid_queue_limits_cancel_update(q: *mut request_queue);
    pub(crate) fn graid_alloc_ordered_workqueue(name: *const c_char, flags: c_uint) -> *mut workqueue_struct;
    pub(crate) fn graid_memalloc_noio_save() -> c_uint;
    pub(crate) fn graid_memalloc_noio_restore(flags: c_uint);
    pub(crate) fn graid_raw_smp_processor_id() -> c_uint;
    pub(crate) fn graid_disk_fops_ptr() -> *const block_device_operations;
    pub(crate) fn graid_module_get();
    pub(crate) fn graid_module_put();
    pub(crate) fn graid_blk_mq_init_hctx(hctx: *mut blk_mq_hw_ctx, data: *mut c_void, index: c_uint) -> c_int;
    pub(crate) fn graid_alloc_unbound_workqueue(name: *const c_char) -> *mut workqueue_struct;
    pub(crate) fn graid_blk_plug_invalidate_ts();
    pub(crate) fn graid_zero_page_address() -> *mut c_void;
    pub(crate) fn graid_bio_iter_iovec(bio: *mut bio, iter: bvec_iter) -> bio_vec;
    pub(crate) fn graid_bio_advance_iter(bio: *mut bio, iter: *mut bvec_iter, bytes: c_uint);
    pub(crate) fn graid_memcpy_from_bvec(to: *mut c_char, bvec: *mut bio_vec);
    pub(crate) fn graid_memcpy_to_bvec(bvec: *mut bio_vec, from: *const c_char);
    pub(crate) fn graid_init_delayed_work(dwork: *mut delayed_work, func: work_func_t);
    pub(crate) fn graid_queue_delayed_work_ms(wq: *mut workqueue_struct, dwork: *mut delayed_work, ms: c_uint) -> bool;
    pub(crate) fn graid_kick_lock_init(lock: *mut spinlock_t);
    pub(crate) fn graid_kick_earlier(wq: *mut workqueue_struct, dwork: *mut delayed_work, ms: c_uint, lock: *mut spinlock_t);
    pub(crate) fn graid_copy_racy(dst: *mut c_void, src: *const c_void, len: usize);
    pub(crate) fn graid_zero_racy(dst: *mut c_void, len: usize);
    pub(crate) fn graid_same_racy(a: *const c_void, b: *const c_void, len: usize) -> bool;
}
