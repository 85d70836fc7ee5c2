//! The Vulkan objects behind the engine: one device and queue, the parity pipeline, and one
//! host-visible storage buffer the batches are staged in (grown as needed).

mod shared;

use ash::vk;
use graid_parity::device as plan;
use graid_parity::Job;
use shared::{HostImport, Shared};

/// The SPIR-V of `shaders/parity.wgsl` (build.rs).
const PARITY_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/parity.spv"));
/// The SPIR-V of `shaders/recover.wgsl`.
const RECOVER_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/recover.spv"));
/// The SPIR-V of `shaders/update.wgsl`.
const UPDATE_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/update.spv"));
/// Invocations per workgroup (the shader's `@workgroup_size`).
const WORKGROUP: u32 = 64;
/// The staging buffer never grows past this (nor past the device's storage buffer range).
const MAX_STAGING_BYTES: u64 = 256 << 20;
/// How long a batch may run on the device before it is given up on.
const BATCH_TIMEOUT_NS: u64 = 10_000_000_000;

/// Why the Vulkan engine cannot start or could not compute.
#[derive(Debug, thiserror::Error)]
pub enum VulkanError {
    #[error("no Vulkan loader (libvulkan.so.1): {0}")]
    Loader(String),
    #[error("no Vulkan device with a compute queue")]
    NoDevice,
    #[error("{what}: {result}")]
    Vk {
        what: &'static str,
        result: vk::Result,
    },
    #[error("a job of {bytes} bytes does not fit the device's {max}-byte buffer")]
    TooBig { bytes: u64, max: u64 },
    #[error("the pool is not on the device's {alignment}-byte import alignment")]
    Misaligned { alignment: u64 },
    #[error("a pool of {bytes} bytes is more than the device's {max}-byte storage buffer")]
    PoolTooBig { bytes: u64, max: u64 },
    #[error("the device did not finish a batch in {} s", BATCH_TIMEOUT_NS / 1_000_000_000)]
    Timeout,
}

/// `result` as a [`VulkanError`] naming `what` failed.
fn vk_err(what: &'static str) -> impl FnOnce(vk::Result) -> VulkanError {
    move |result| VulkanError::Vk { what, result }
}

/// The push constants as bytes (native order, as the shader reads them).
fn constant_bytes(constants: &plan::Constants) -> Vec<u8> {
    constants.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// One dispatch: its shader, constants (with the base), and whether it runs on the staging
/// buffer (else the shared region).
struct Dispatch {
    kernel: plan::Kernel,
    constants: plan::Constants,
    staged: bool,
}

/// The staging buffer, persistently mapped.
struct Staging {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    bytes: u64,
}

pub(crate) struct Gpu {
    // Kept so the loader stays open while the instance lives.
    _entry: ash::Entry,
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    queue: vk::Queue,
    name: String,
    /// A GPU, not a CPU implementation.
    gpu_device: bool,
    /// The device's largest storage buffer, capped at [`MAX_STAGING_BYTES`].
    max_bytes: u64,
    max_groups: u32,
    /// The device's largest storage buffer, uncapped (an imported pool may be bigger than the
    /// staging buffer ever is).
    max_range: u64,
    /// Import support, if the device has `VK_EXT_external_memory_host`.
    host_import: Option<HostImport>,
    /// The generation and the recovery shaders and pipelines.
    shader: vk::ShaderModule,
    recover_shader: vk::ShaderModule,
    update_shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    recover_pipeline: vk::Pipeline,
    update_pipeline: vk::Pipeline,
    descriptor_pool: vk::DescriptorPool,
    /// The staging buffer's descriptor set, and the shared region's.
    descriptor_set: vk::DescriptorSet,
    shared_set: vk::DescriptorSet,
    command_pool: vk::CommandPool,
    command: vk::CommandBuffer,
    fence: vk::Fence,
    staging: Option<Staging>,
    shared: Option<Shared>,
    /// Jobs computed in place in the shared region, and jobs staged.
    pub(crate) shared_jobs: u64,
    pub(crate) staged_jobs: u64,
}

// SAFETY: Vulkan handles may be used from any thread given external synchronisation, which the
// engine's mutex provides; the mapped pointer is memory this value owns.
unsafe impl Send for Gpu {}

/// Device types in order of preference.
fn preference(kind: vk::PhysicalDeviceType) -> u32 {
    match kind {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

impl Gpu {
    pub(crate) fn new() -> Result<Self, VulkanError> {
        // SAFETY: loads the system's Vulkan loader; its entry points are used as the spec says.
        let entry =
            unsafe { ash::Entry::load() }.map_err(|e| VulkanError::Loader(e.to_string()))?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"graid-helper")
            .api_version(vk::make_api_version(0, 1, 1, 0));
        // SAFETY: a valid create info; the instance is destroyed in `drop` (or below on error).
        let instance = unsafe {
            entry.create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
        }
        .map_err(vk_err("vkCreateInstance"))?;
        let (physical, family, props, device, import) = match Self::open_device(&instance) {
            Ok(opened) => opened,
            Err(e) => {
                // SAFETY: nothing made from the instance survives.
                unsafe { instance.destroy_instance(None) };
                return Err(e);
            }
        };
        let name = props
            .device_name_as_c_str()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unnamed".into());
        // From here on a failure drops `gpu`, which destroys what was made (null handles are
        // skipped by Vulkan's destroy calls), the device and the instance last.
        let mut gpu = Self {
            _entry: entry,
            instance,
            physical,
            // SAFETY: the queue family and index exist (requested in `open_device`).
            queue: unsafe { device.get_device_queue(family, 0) },
            device,
            name,
            gpu_device: preference(props.device_type) < preference(vk::PhysicalDeviceType::CPU),
            max_bytes: u64::from(props.limits.max_storage_buffer_range).min(MAX_STAGING_BYTES),
            max_groups: props.limits.max_compute_work_group_count[0],
            max_range: u64::from(props.limits.max_storage_buffer_range),
            host_import: None,
            shader: vk::ShaderModule::null(),
            recover_shader: vk::ShaderModule::null(),
            update_shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            recover_pipeline: vk::Pipeline::null(),
            update_pipeline: vk::Pipeline::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            descriptor_set: vk::DescriptorSet::null(),
            shared_set: vk::DescriptorSet::null(),
            command_pool: vk::CommandPool::null(),
            command: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            staging: None,
            shared: None,
            shared_jobs: 0,
            staged_jobs: 0,
        };
        if let Some(alignment) = import {
            gpu.host_import = Some(HostImport {
                ext: ash::ext::external_memory_host::Device::new(&gpu.instance, &gpu.device),
                alignment,
            });
        }
        gpu.build_pipeline()?;
        gpu.build_commands(family)?;
        Ok(gpu)
    }

    /// The preferred device with a compute queue, opened: it, the queue's family, its
    /// properties, the logical device, and the host pointer alignment it imports at if it has
    /// `VK_EXT_external_memory_host` (enabled then).
    #[allow(clippy::type_complexity)]
    fn open_device(
        instance: &ash::Instance,
    ) -> Result<
        (
            vk::PhysicalDevice,
            u32,
            vk::PhysicalDeviceProperties,
            ash::Device,
            Option<u64>,
        ),
        VulkanError,
    > {
        // SAFETY: a live instance.
        let physicals = unsafe { instance.enumerate_physical_devices() }
            .map_err(vk_err("enumerate devices"))?;
        let mut best: Option<(u32, vk::PhysicalDevice, u32, vk::PhysicalDeviceProperties)> = None;
        for physical in physicals {
            // SAFETY: a device of this instance.
            let props = unsafe { instance.get_physical_device_properties(physical) };
            // SAFETY: as above.
            let families =
                unsafe { instance.get_physical_device_queue_family_properties(physical) };
            let Some(family) = families
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            else {
                continue;
            };
            let rank = preference(props.device_type);
            if best.as_ref().is_none_or(|b| rank < b.0) {
                best = Some((rank, physical, family as u32, props));
            }
        }
        let (_, physical, family, props) = best.ok_or(VulkanError::NoDevice)?;
        let priorities = [1.0f32];
        let queue_info = vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities);
        let import = host_import_alignment(instance, physical);
        let extensions = [ash::ext::external_memory_host::NAME.as_ptr()];
        let enabled = if import.is_some() {
            &extensions[..]
        } else {
            &[]
        };
        let device_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(std::slice::from_ref(&queue_info))
            .enabled_extension_names(enabled);
        // SAFETY: a valid create info for a device of this instance; destroyed in `drop`.
        let device = unsafe { instance.create_device(physical, &device_info, None) }
            .map_err(vk_err("vkCreateDevice"))?;
        Ok((physical, family, props, device, import))
    }

    pub(crate) fn device_name(&self) -> &str {
        &self.name
    }

    pub(crate) fn is_gpu(&self) -> bool {
        self.gpu_device
    }

    /// The shaders, their one storage buffer binding and push constants, the pipelines.
    fn build_pipeline(&mut self) -> Result<(), VulkanError> {
        let d = &self.device;
        let binding = vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE);
        // SAFETY: a valid create info; destroyed in `drop`.
        self.set_layout = unsafe {
            d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default()
                    .bindings(std::slice::from_ref(&binding)),
                None,
            )
        }
        .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
        let push = vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(std::mem::size_of::<plan::Constants>() as u32);
        let layouts = [self.set_layout];
        // SAFETY: as above.
        self.pipeline_layout = unsafe {
            d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&layouts)
                    .push_constant_ranges(std::slice::from_ref(&push)),
                None,
            )
        }
        .map_err(vk_err("vkCreatePipelineLayout"))?;
        (self.shader, self.pipeline) = self.build_shader(PARITY_SPV)?;
        (self.recover_shader, self.recover_pipeline) = self.build_shader(RECOVER_SPV)?;
        (self.update_shader, self.update_pipeline) = self.build_shader(UPDATE_SPV)?;
        let d = &self.device;
        let size = vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(2);
        // SAFETY: as above.
        self.descriptor_pool = unsafe {
            d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(2)
                    .pool_sizes(std::slice::from_ref(&size)),
                None,
            )
        }
        .map_err(vk_err("vkCreateDescriptorPool"))?;
        let layouts = [self.set_layout, self.set_layout];
        // SAFETY: two sets of the pool just made, with its layout.
        let sets = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(self.descriptor_pool)
                    .set_layouts(&layouts),
            )
        }
        .map_err(vk_err("vkAllocateDescriptorSets"))?;
        self.descriptor_set = sets.first().copied().unwrap_or_default();
        self.shared_set = sets.get(1).copied().unwrap_or_default();
        Ok(())
    }

    /// A shader module from `spv` and its compute pipeline (on the pipeline layout).
    fn build_shader(&self, spv: &[u8]) -> Result<(vk::ShaderModule, vk::Pipeline), VulkanError> {
        let d = &self.device;
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spv))
            .map_err(|_| vk_err("read the SPIR-V")(vk::Result::ERROR_INVALID_SHADER_NV))?;
        // SAFETY: valid SPIR-V (naga validated it at build time); destroyed in `drop`.
        let module = unsafe {
            d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
        }
        .map_err(vk_err("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.pipeline_layout);
        // SAFETY: as above.
        let pipelines = unsafe {
            d.create_compute_pipelines(vk::PipelineCache::null(), std::slice::from_ref(&info), None)
        };
        match pipelines {
            Ok(p) => Ok((module, p.first().copied().unwrap_or_default())),
            Err((_, result)) => {
                // SAFETY: the module is unused.
                unsafe { d.destroy_shader_module(module, None) };
                Err(vk_err("vkCreateComputePipelines")(result))
            }
        }
    }

    /// The command buffer the batches are recorded in, and the fence they are waited on with.
    fn build_commands(&mut self, family: u32) -> Result<(), VulkanError> {
        let d = &self.device;
        // SAFETY: valid create infos; destroyed in `drop`.
        self.command_pool = unsafe {
            d.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .map_err(vk_err("vkCreateCommandPool"))?;
        // SAFETY: as above.
        let buffers = unsafe {
            d.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.command_pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )
        }
        .map_err(vk_err("vkAllocateCommandBuffers"))?;
        self.command = buffers.first().copied().unwrap_or_default();
        // SAFETY: as above.
        self.fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vk_err("vkCreateFence"))?;
        Ok(())
    }

    /// A staging buffer of at least `bytes`, bound to the descriptor set.
    fn staging(&mut self, bytes: u64) -> Result<*mut u8, VulkanError> {
        if let Some(s) = &self.staging {
            if s.bytes >= bytes {
                return Ok(s.mapped);
            }
        }
        self.free_staging();
        // Grow in powers of two, so a run of growing batches reallocates rarely.
        let bytes = bytes.next_power_of_two().min(self.max_bytes).max(bytes);
        let d = &self.device;
        let info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a valid create info; freed in `free_staging`.
        let buffer = unsafe { d.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        // SAFETY: the buffer just made.
        let needs = unsafe { d.get_buffer_memory_requirements(buffer) };
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let Some(index) = self.memory_type(needs.memory_type_bits, wanted) else {
            // SAFETY: the buffer is unused.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(vk_err("no host-visible coherent memory")(
                vk::Result::ERROR_FEATURE_NOT_PRESENT,
            ));
        };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(needs.size)
            .memory_type_index(index);
        // SAFETY: a valid allocation info.
        let memory = match unsafe { d.allocate_memory(&alloc, None) } {
            Ok(memory) => memory,
            Err(result) => {
                // SAFETY: the buffer is unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(vk_err("vkAllocateMemory")(result));
            }
        };
        // SAFETY: fresh buffer and memory of the required size and type; mapped once, whole.
        let mapped = unsafe {
            d.bind_buffer_memory(buffer, memory, 0)
                .and_then(|()| d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()))
        };
        let mapped = match mapped {
            Ok(p) => p.cast::<u8>(),
            Err(result) => {
                // SAFETY: neither is in use.
                unsafe {
                    d.destroy_buffer(buffer, None);
                    d.free_memory(memory, None);
                }
                return Err(vk_err("bind and map the staging buffer")(result));
            }
        };
        self.bind_set(self.descriptor_set, buffer);
        self.staging = Some(Staging {
            buffer,
            memory,
            mapped,
            bytes,
        });
        Ok(mapped)
    }

    /// A memory type among `bits` with `wanted` properties.
    fn memory_type(&self, bits: u32, wanted: vk::MemoryPropertyFlags) -> Option<u32> {
        // SAFETY: a device of this instance.
        let types = unsafe {
            self.instance
                .get_physical_device_memory_properties(self.physical)
        };
        (0..types.memory_type_count).find(|&i| {
            bits & (1 << i) != 0
                && types.memory_types[i as usize]
                    .property_flags
                    .contains(wanted)
        })
    }

    /// Points descriptor set `set` at the whole of `buffer`.
    fn bind_set(&self, set: vk::DescriptorSet, buffer: vk::Buffer) {
        let buffer_info = vk::DescriptorBufferInfo::default()
            .buffer(buffer)
            .offset(0)
            .range(vk::WHOLE_SIZE);
        let write = vk::WriteDescriptorSet::default()
            .dst_set(set)
            .dst_binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(std::slice::from_ref(&buffer_info));
        // SAFETY: the set is not in use (no batch runs while the engine's lock is held).
        unsafe {
            self.device
                .update_descriptor_sets(std::slice::from_ref(&write), &[])
        };
    }

    fn free_staging(&mut self) {
        if let Some(s) = self.staging.take() {
            // SAFETY: no batch runs (each waits for its fence); the mapping goes with the memory.
            unsafe {
                self.device.destroy_buffer(s.buffer, None);
                self.device.free_memory(s.memory, None);
            }
        }
    }

    /// Computes `jobs` (generations and recoveries, validated): those whose columns lie in the
    /// shared region in place, the others staged, as many per submission as fit the staging
    /// buffer.
    pub(crate) fn compute(&mut self, jobs: &mut [Job<'_>]) -> Result<(), VulkanError> {
        let places: Vec<Option<u32>> = jobs.iter().map(|job| self.shared_base(job)).collect();
        let mut start = 0;
        while start < jobs.len() {
            let mut end = start;
            let mut bytes = 0u64;
            while let Some(job) = jobs.get(end) {
                let size = if places[end].is_some() {
                    0
                } else {
                    job_bytes(job)
                };
                if size > self.max_bytes {
                    return Err(VulkanError::TooBig {
                        bytes: size,
                        max: self.max_bytes,
                    });
                }
                if bytes + size > self.max_bytes {
                    break;
                }
                bytes += size;
                end += 1;
            }
            self.submit(&mut jobs[start..end], &places[start..end], bytes)?;
            start = end;
        }
        Ok(())
    }

    /// Runs a shader once per job of `jobs`: in place where `places` gives the job's word
    /// offset in the shared region, else staged (`bytes` in all): the columns it reads copied
    /// in, those it writes copied back.
    fn submit(
        &mut self,
        jobs: &mut [Job<'_>],
        places: &[Option<u32>],
        bytes: u64,
    ) -> Result<(), VulkanError> {
        let mapped = if bytes > 0 {
            self.staging(bytes)?
        } else {
            std::ptr::null_mut()
        };
        let mut dispatches = Vec::with_capacity(jobs.len());
        let mut at = 0usize;
        for (job, place) in jobs.iter().zip(places) {
            let Some(plan) = plan::plan(job) else {
                continue;
            };
            let len = plan.columns.first().map_or(0, |c| c.len());
            let base = match place {
                Some(base) => *base,
                None => {
                    let first = at;
                    for (slot, column) in plan.columns.iter().enumerate() {
                        if plan.reads(slot) {
                            // SAFETY: `at + len` lies within the staging buffer (sized from
                            // `job_bytes`).
                            unsafe {
                                std::ptr::copy_nonoverlapping(column.as_ptr(), mapped.add(at), len)
                            };
                        }
                        at += len;
                    }
                    (first / 4) as u32
                }
            };
            let mut constants = plan.constants;
            constants[0] = base;
            dispatches.push(Dispatch {
                kernel: plan.kernel,
                constants,
                staged: place.is_none(),
            });
        }
        self.run(&dispatches)?;
        for (job, dispatch) in jobs.iter_mut().zip(&dispatches) {
            if !dispatch.staged {
                self.shared_jobs += 1;
                continue;
            }
            self.staged_jobs += 1;
            let Some(plan) = plan::plan(job) else {
                continue;
            };
            let len = dispatch.constants[1] as usize * 4;
            let base = dispatch.constants[0] as usize * 4;
            let slots: Vec<usize> = (0..plan.written.len())
                .filter(|&i| plan.written[i])
                .collect();
            drop(plan);
            for (slot, dst) in slots.into_iter().zip(plan::written_mut(job)) {
                // SAFETY: the column the shader wrote, within the staging buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        mapped.add(base + slot * len),
                        dst.as_mut_ptr(),
                        len,
                    )
                };
            }
        }
        Ok(())
    }

    /// Records `dispatches`, submits, and waits.
    fn run(&mut self, dispatches: &[Dispatch]) -> Result<(), VulkanError> {
        let d = &self.device;
        let cb = self.command;
        // SAFETY: the command buffer is not pending (every submission is waited for); the
        // pipeline, layout and set are live; the set's buffer holds every job's columns.
        unsafe {
            d.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
                .map_err(vk_err("vkResetCommandBuffer"))?;
            d.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vk_err("vkBeginCommandBuffer"))?;
            let (mut bound, mut pipeline) = (None, None);
            for dispatch in dispatches {
                let words = dispatch.constants[1];
                let groups = words.div_ceil(WORKGROUP);
                if groups > self.max_groups {
                    return Err(VulkanError::TooBig {
                        bytes: u64::from(words) * 4,
                        max: u64::from(self.max_groups) * u64::from(WORKGROUP) * 4,
                    });
                }
                let wanted = match dispatch.kernel {
                    plan::Kernel::Generate => self.pipeline,
                    plan::Kernel::Recover => self.recover_pipeline,
                    plan::Kernel::Update => self.update_pipeline,
                };
                if pipeline != Some(wanted) {
                    d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, wanted);
                    pipeline = Some(wanted);
                }
                let set = if dispatch.staged {
                    self.descriptor_set
                } else {
                    self.shared_set
                };
                if bound != Some(set) {
                    d.cmd_bind_descriptor_sets(
                        cb,
                        vk::PipelineBindPoint::COMPUTE,
                        self.pipeline_layout,
                        0,
                        &[set],
                        &[],
                    );
                    bound = Some(set);
                }
                d.cmd_push_constants(
                    cb,
                    self.pipeline_layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &constant_bytes(&dispatch.constants),
                );
                d.cmd_dispatch(cb, groups, 1, 1);
            }
            // The shader's writes, visible to the host once the fence signals.
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ);
            d.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                std::slice::from_ref(&barrier),
                &[],
                &[],
            );
            d.end_command_buffer(cb)
                .map_err(vk_err("vkEndCommandBuffer"))?;
            let submit = vk::SubmitInfo::default().command_buffers(std::slice::from_ref(&cb));
            d.queue_submit(self.queue, std::slice::from_ref(&submit), self.fence)
                .map_err(vk_err("vkQueueSubmit"))?;
            let waited = d.wait_for_fences(&[self.fence], true, BATCH_TIMEOUT_NS);
            if waited.is_err() {
                // Drain the device before the caller computes these jobs itself: no late
                // write of the shader may land in a column (a shared pool slot) afterwards.
                // A device that never drains holds this thread, and the kernel's deadlines
                // then take the helper's jobs back.
                let _ = d.device_wait_idle();
            }
            let reset = d
                .reset_fences(&[self.fence])
                .map_err(vk_err("vkResetFences"));
            match waited {
                Ok(()) => reset,
                Err(vk::Result::TIMEOUT) => Err(VulkanError::Timeout),
                Err(result) => Err(vk_err("vkWaitForFences")(result)),
            }
        }
    }
}

/// Bytes a job stages: all its columns.
fn job_bytes(job: &Job<'_>) -> u64 {
    plan::bytes(job).unwrap_or(0) as u64
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: nothing is pending once the device is idle; each object is destroyed once,
        // children before their parents (null handles are ignored).
        unsafe {
            let _ = self.device.device_wait_idle();
            self.free_staging();
            self.free_shared();
            let d = &self.device;
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.command_pool, None);
            d.destroy_descriptor_pool(self.descriptor_pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline(self.recover_pipeline, None);
            d.destroy_pipeline(self.update_pipeline, None);
            d.destroy_pipeline_layout(self.pipeline_layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
            d.destroy_shader_module(self.recover_shader, None);
            d.destroy_shader_module(self.update_shader, None);
            d.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// The host pointer alignment `physical` imports memory at, if it has
/// `VK_EXT_external_memory_host`.
fn host_import_alignment(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Option<u64> {
    // SAFETY: a device of this instance.
    let extensions = unsafe { instance.enumerate_device_extension_properties(physical) }.ok()?;
    let has = extensions
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(ash::ext::external_memory_host::NAME));
    if !has {
        return None;
    }
    let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
    // SAFETY: as above; Vulkan 1.1 (the instance's version) has the query.
    unsafe { instance.get_physical_device_properties2(physical, &mut props) };
    Some(host.min_imported_host_pointer_alignment)
}
