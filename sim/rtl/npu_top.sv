// npu_top: the NPU (docs/architecture.md section 1).
//
// Register bus (combinational read, write on the clock edge), one memory master port shared by
// three units, an interrupt line and an instruction-trace port. Offsets, opcodes, sizes and
// error codes all come from the generated package npu_config_pkg.
//
//   npu_ifu  ring entries and instruction fetch (block buffer of 8 instructions)
//   npu_ldq  LOAD's pipelined reads (up to 128 bursts in flight, rows return in order)
//   npu_stq  STORE's posted writes
//   here     command processor, dispatcher (token rule, checks), the three engines' queues,
//            GEMM array, VEC unit, scratchpads, registers, counters, memory-port arbiter
//
// Execution (architecture.md 1.4, docs/rtl-timing.md): the command processor picks the lowest-numbered
// ring with HEAD != TAIL and reads the entry. For an EXEC the dispatcher fetches and decodes
// the command buffer in program order, does the program-order checks (fetch faults,
// ILLEGAL_INSTRUCTION, token counting and TOKEN_DEADLOCK, SP_RANGE) and hands each
// instruction to its engine's in-order queue (EQ_DEPTH entries). LOAD, COMPUTE and STORE run
// concurrently: an engine starts its next instruction when its pops are covered by pushes of
// *completed* instructions of the other engine (pushes take effect at completion) and, for
// LOAD and STORE, when no earlier (program order) STORE/LOAD with an overlapping DRAM range
// is queued or running. Fetch waits while an earlier queued or running STORE overlaps the
// instruction being fetched. Errors are precise in the error registers: the first faulting
// instruction in program order is reported once every earlier instruction has finished;
// later instructions are dropped (one already running finishes).
//
// Scratchpads are arrays of rows read through registered addresses (synchronous-read SRAM
// behaviour): COMPUTE has one read port per scratchpad (the VEC window modes read WIN
// consecutive rows of ACT and WGT at once, ISA 1.3), STORE a second one; LOAD and COMPUTE
// write. A wide row (ISA 1.4, architecture.md 1.4.3: N int16 in the ACT rows a, a + 1) is
// read or written in one cycle: ACT is interleaved over 2·WIN banks by row address, so the
// two rows are always in different banks, and a window group of WIN wide elements (2·WIN
// consecutive rows) is read in one cycle too. A reset "clears" the scratchpads in one cycle
// by bumping an epoch: a row whose tag differs from the current epoch reads as zero.
module npu_top
  import npu_config_pkg::*;
#(
  parameter int unsigned ARRAY_DIM = DEFAULT_ARRAY_DIM
) (
  input  logic                              clk_i,
  input  logic                              rst_ni,
  // Freeze: on a clock edge with hold_i high only register writes take effect; the engines,
  // counters and the memory port keep their state (the harness applies register writes this
  // way, so device time advances only while it runs).
  input  logic                              hold_i,

  input  logic                              reg_valid_i,
  input  logic                              reg_write_i,
  input  logic [11:0]                       reg_addr_i,
  input  logic [31:0]                       reg_wdata_i,
  output logic [31:0]                       reg_rdata_o,

  output logic                              mem_req_valid_o,
  input  logic                              mem_req_ready_i,
  output logic                              mem_req_write_o,
  output logic [31:0]                       mem_req_addr_o,
  output logic [7:0]                        mem_req_beats_o,
  output logic [int'(DMA_BEAT_BYTES)*8-1:0] mem_req_wdata_o,
  output logic [int'(DMA_BEAT_BYTES)-1:0]   mem_req_wstrb_o,
  input  logic                              mem_rsp_valid_i,
  input  logic [int'(DMA_BEAT_BYTES)*8-1:0] mem_rsp_data_i,
  input  logic [32:0]                       dram_bytes_i,

  output logic                              irq_o,
  output logic                              busy_o,

  // Instruction trace: one port per engine (0 LOAD, 1 COMPUTE, 2 STORE), pulsed when an
  // instruction of that engine completes (several may complete on one edge).
  output logic [2:0]                        trace_valid_o,
  output logic [7:0]                        trace_queue_o,
  output logic [95:0]                       trace_offset_o,
  output logic [767:0]                      trace_instr_o
);
  localparam int unsigned N = ARRAY_DIM;
  localparam int unsigned Q = NUM_QUEUES;
  localparam int unsigned QW = $clog2(Q);
  localparam int unsigned BEAT_BYTES = int'(DMA_BEAT_BYTES);
  localparam int unsigned ROW_BYTES = 4 * N;               // widest row (ACC), >= 32 bytes
  localparam int unsigned RB = ROW_BYTES * 8;
  localparam int unsigned ACT_ROWS = int'(ACT_SP_BYTES) / N;
  localparam int unsigned WGT_ROWS = int'(WGT_SP_BYTES) / N;
  localparam int unsigned WGT_TILES = int'(WGT_SP_BYTES) / (N * N);
  localparam int unsigned ACC_ROWS = int'(ACC_SP_BYTES) / (4 * N);
  localparam int unsigned AAW = $clog2(ACT_ROWS);
  localparam int unsigned WAW = $clog2(WGT_ROWS);
  localparam int unsigned CAW = $clog2(ACC_ROWS);
  localparam logic [7:0] NUM_CNT = 8'(NUM_COUNTERS);
  localparam logic [8:0] IRQ_BITS = 9'(IRQ_ERROR) | 9'((1 << Q) - 1);
  // Bursts LOAD keeps in flight: enough for one-beat rows at full bus rate up to L ~ 120.
  localparam int unsigned LDQ_DEPTH = 128;
  // ACT rows holding the 256-entry VEC LUT table.
  localparam int unsigned LUT_ROWS = 256 / N;
  // ACT rows holding a wide LUT's 257 int16 entries (ISA 1.4): ceil(514 / N), padded to rows.
  localparam int unsigned WLUT_ROWS = (514 + N - 1) / N;
  // They are latched two rows per cycle through the wide read port (rows a, a + 1).
  localparam int unsigned WLUT_PAIRS = (WLUT_ROWS + 1) / 2;
  localparam int unsigned WLUT_BITS = WLUT_PAIRS * 2 * N * 8;
  // Instructions each engine's queue holds between the dispatcher and the engine.
  localparam int unsigned EQ_DEPTH = ENGINE_QUEUE_DEPTH;
  // VEC window modes (ISA 1.3): consecutive elements of one window row read per cycle.
  localparam int unsigned WIN = VEC_WINDOW_ELEMS;
  // Wide window elements (ISA 1.4, two rows each) read per cycle: WIN of them, 2·WIN rows.
  localparam int unsigned WIN16 = WIN;
  localparam int unsigned EQW = $clog2(EQ_DEPTH);
  // Read bursts in flight on the memory port (LOAD's queue, one fetch, one STORE PTE read).
  localparam int unsigned TAG_DEPTH = 256;

  // ------------------------------------------------------------------------------------------
  // Scratchpads
  // ------------------------------------------------------------------------------------------
  logic [N*8-1:0]  act_mem [ACT_ROWS];
  logic [31:0]     act_tag [ACT_ROWS];
  logic [N*8-1:0]  wgt_mem [WGT_ROWS];
  logic [31:0]     wgt_tag [WGT_ROWS];
  logic [N*32-1:0] acc_mem [ACC_ROWS];
  logic [31:0]     acc_tag [ACC_ROWS];
  logic [31:0]     epoch_q;
  // COMPUTE's read ports.
  logic [AAW-1:0]  act_ra_q;
  logic [WAW-1:0]  wgt_ra_q;
  logic [CAW-1:0]  acc_ra_q;
  logic [N*8-1:0]  act_rd;
  logic [N*8-1:0]  wgt_rd;
  logic [N*32-1:0] acc_rd;
  logic [N*16-1:0] act_rd16;         // the wide row at act_ra_q (ISA 1.4): rows a, a + 1
  assign act_rd = (act_tag[act_ra_q] == epoch_q) ? act_mem[act_ra_q] : '0;
  assign wgt_rd = (wgt_tag[wgt_ra_q] == epoch_q) ? wgt_mem[wgt_ra_q] : '0;
  assign acc_rd = (acc_tag[acc_ra_q] == epoch_q) ? acc_mem[acc_ra_q] : '0;
  // STORE's read port (one row address into the scratchpad the STORE reads; a wide STORE,
  // ISA 1.4, reads the two ACT rows of a wide row, which lie in different banks).
  logic [31:0]     s_ra_q;
  logic [1:0]      s_sp_q;
  logic            s_wide_q;
  logic [RB-1:0]   s_rd;
  always_comb begin
    logic [AAW-1:0] a1;
    a1 = AAW'(s_ra_q) + 1'b1;
    unique case (s_sp_q)
      SP_ACT[1:0]: begin
        s_rd = (act_tag[AAW'(s_ra_q)] == epoch_q) ? RB'(act_mem[AAW'(s_ra_q)]) : '0;
        if (s_wide_q && act_tag[a1] == epoch_q) s_rd[N*16-1:N*8] = act_mem[a1];
      end
      SP_WGT[1:0]: s_rd = (wgt_tag[WAW'(s_ra_q)] == epoch_q) ? RB'(wgt_mem[WAW'(s_ra_q)]) : '0;
      default:     s_rd = (acc_tag[CAW'(s_ra_q)] == epoch_q) ? acc_mem[CAW'(s_ra_q)] : '0;
    endcase
  end

  // ------------------------------------------------------------------------------------------
  // Architectural registers
  // ------------------------------------------------------------------------------------------
  logic        enable_q;
  logic [8:0]  irq_status_q, irq_mask_q;
  logic [7:0]  err_code_q;
  logic [31:0] err_addr_q, err_instr_q, reset_count_q;
  logic [QW-1:0] err_queue_q;
  logic [31:0] ring_base_q [Q];
  logic [31:0] ring_size_q [Q];
  logic [31:0] ring_head_q [Q];
  logic [31:0] ring_tail_q [Q];
  logic [31:0] comp_seq_q  [Q];
  logic [63:0] cnt_q [NUM_COUNTERS];

  // ------------------------------------------------------------------------------------------
  // Dispatcher state
  // ------------------------------------------------------------------------------------------
  typedef enum logic [3:0] {
    D_IDLE, D_RING_WAIT, D_RING_DEC, D_FETCH, D_FETCH_WAIT, D_DECODE, D_RANGE, D_ISSUE,
    D_DRAIN
  } dstate_e;
  dstate_e ds_q;

  logic [QW-1:0] q_q;            // queue being served
  logic [31:0]   cb_va_q, cb_len_q, pt_base_q, pc_q;
  logic [31:0]   entry_pa_q;
  logic [31:0]   dw [8];         // instruction (or ring entry) being dispatched
  logic [7:0]    tok_q [4];      // program-order token counts: 0 L->C, 1 C->L, 2 C->S, 3 S->C
  logic [8:0]    tok_av_q [4];   // tokens pushed by completed instructions, not yet popped
  logic [33:0]   d_lo_q, d_hi_q; // DRAM VA range of the LOAD/STORE being dispatched
  // The first error in program order so far (precise error registers): latched into the
  // architectural registers once every instruction before it has finished.
  logic          perr_v_q;
  logic [7:0]    perr_code_q;
  logic [31:0]   perr_addr_q, perr_pc_q;

  // Engine queues: instruction words, offset in the command buffer, DRAM VA range.
  typedef struct packed {
    logic [255:0] w;
    logic [31:0]  pc;
    logic [33:0]  lo, hi;
  } eq_t;
  eq_t            eq_q [3][EQ_DEPTH];
  logic [EQ_DEPTH-1:0] eq_v_q [3];
  logic [EQW-1:0] eq_hd_q [3];
  logic [EQW-1:0] eq_tl_q [3];

  // ------------------------------------------------------------------------------------------
  // Engine state
  // ------------------------------------------------------------------------------------------
  typedef enum logic [1:0] { L_IDLE, L_ROW, L_DONE } lstate_e;
  typedef enum logic [1:0] { T_IDLE, T_RUN, T_DONE } sstate_e;
  typedef enum logic [2:0] { C_IDLE, G_BLK, G_WLOAD, G_RUN, V_SETUP, V_RUN, C_DONE } cstate_e;
  lstate_e ls_q;
  sstate_e ss_q;
  cstate_e cs_q;
  logic [31:0] lw [8];               // LOAD engine's instruction
  logic [31:0] sw [8];               // STORE engine's instruction
  logic [31:0] iw [8];               // COMPUTE engine's instruction
  logic [31:0] l_pc_q, s_pc_q, c_pc_q;
  logic [33:0] l_lo_q, l_hi_q, s_lo_q, s_hi_q;

  // LOAD loop registers.
  logic [15:0] l_z_q, l_y_q, l_x_q;  // padded loop indices
  logic [16:0] l_yn_q, l_xn_q;       // padded extents
  logic [31:0] l_row_q;              // scratchpad row
  logic        l_done_q;             // every row has been generated
  logic [7:0]  l_len_q;              // bytes per DRAM row
  logic [1:0]  l_sp_q;
  // STORE loop registers.
  logic [15:0] s_z_q, s_y_q, s_x_q;
  logic [16:0] s_yn_q, s_xn_q;
  logic        s_done_q;             // every row has been handed to npu_stq
  logic [7:0]  s_len_q;
  // COMPUTE loop registers: GEMM o/i/r, VEC o/r.
  logic [15:0] lz_q, ly_q, lx_q;
  logic [N*N*8-1:0] wtile_q;         // weight tile held in the array, row k at bits k*N*8
  logic [N*N*8-1:0] wnext_q;         // tile being loaded for the next block
  logic           wl_run_q;          // weight loader active
  logic [15:0]    k_q;               // rows the loader has delivered
  logic [N*32-1:0] v_bias_q, v_mul_q, v_shift_q;   // REQUANT / DWCONV per-lane parameters
  logic [159:0]    v_par_q;          // scalars of ACC row P (lanes 0..4) for the other modes
  logic [2047:0]   v_table_q;        // LUT table, entry e at bits 8e+7:8e
  logic [WLUT_BITS-1:0] v_wtable_q;  // wide LUT table (ISA 1.4), entry e at bits 16e+15:16e
  // SOFTMAX (ISA 1.3): int32 table (entry e at bits 32e+31:32e), pass, segment max and sum,
  // and the sequential divider (remainder, quotient, step).
  logic [8191:0]      v_tbl32_q;
  logic [1:0]         v_sm_ph_q;     // 0 max, 1 sum, 2 divide, 3 output rows
  logic signed [7:0]  v_max_q;
  logic signed [63:0] v_sum_q;
  logic [62:0]        v_rem_q;       // < S < 2^63
  logic [63:0]        v_quo_q;
  logic [5:0]         v_div_q;
  logic [N*32-1:0] v_accum_q;        // window accumulators
  logic [N*8-1:0]  v_a_q;            // ADD/MUL: operand a of the current row
  logic            v_ph_q;           // ADD/MUL: reading operand b
  logic [7:0]      v_ky_q, v_kx_q;   // window element
  logic [31:0]     v_so_q, v_base_q, v_line_q;      // src row of this o, this (o, r), window line
  logic [31:0]     v_ao_q, v_ab_q;   // ADD/MUL aux rows of this o, this (o, r)
  logic [AAW-1:0]  v_dst_o_q, v_dst_q;

  // Fetch unit (ring entries and instructions)
  logic         ifu_start_q, ifu_phys_q, tlb_flush_q;
  logic [31:0]  ifu_addr_q;
  logic         ifu_busy, ifu_done, ifu_err, ifu_stall;
  logic [7:0]   ifu_err_code;
  logic [31:0]  ifu_err_addr;
  logic [255:0] ifu_data;
  logic         ifu_req_valid;
  logic [31:0]  ifu_req_addr;
  logic [7:0]   ifu_req_beats;

  // Memory port: per-unit grants and routed responses (below).
  logic ifu_gnt, ldq_gnt, stq_gnt;
  logic ifu_rsp, ldq_rsp, stq_rsp;
  logic st_inval;                    // a STORE beat is written this edge (fetch buffer check)

  // Soft reset: a CONTROL write with the RESET bit takes effect on this edge.
  logic soft_rst;
  assign soft_rst = reg_valid_i && reg_write_i && reg_addr_i == REG_CONTROL &&
                    (reg_wdata_i & CONTROL_RESET) != 0;

  npu_ifu #(.BEAT_BYTES(BEAT_BYTES)) u_ifu (
    .clk_i, .rst_ni, .hold_i, .clear_i(soft_rst), .flush_i(tlb_flush_q || stq_pt_write),
    .inval_i(st_inval), .inval_pa_i(mem_req_addr_o), .inval_len_i(9'(BEAT_BYTES)),
    .pt_base_i(pt_base_q), .dram_bytes_i,
    .start_i(ifu_start_q), .phys_i(ifu_phys_q), .addr_i(ifu_addr_q), .limit_i(cb_len_q - pc_q),
    .busy_o(ifu_busy), .done_o(ifu_done), .err_o(ifu_err), .err_code_o(ifu_err_code),
    .err_addr_o(ifu_err_addr), .data_o(ifu_data), .stall_o(ifu_stall),
    .mem_req_valid_o(ifu_req_valid), .mem_req_ready_i(ifu_gnt), .mem_req_addr_o(ifu_req_addr),
    .mem_req_beats_o(ifu_req_beats), .mem_rsp_valid_i(ifu_rsp), .mem_rsp_data_i
  );

  // LOAD's pipelined read path.
  logic          ldq_req_valid_q, ldq_req_ready;
  logic [31:0]   ldq_req_va_q, ldq_req_row_q;
  logic          ldq_row_valid, ldq_idle, ldq_err, ldq_stall;
  logic [RB-1:0] ldq_row_data;
  logic [31:0]   ldq_row_idx;
  logic [7:0]    ldq_row_len, ldq_err_code;
  logic [31:0]   ldq_err_addr;
  logic          ldq_mem_valid;
  logic [31:0]   ldq_mem_addr;
  logic [7:0]    ldq_mem_beats;
  npu_ldq #(.ROW_BYTES(ROW_BYTES), .BEAT_BYTES(BEAT_BYTES), .DEPTH(LDQ_DEPTH)) u_ldq (
    .clk_i, .rst_ni, .hold_i, .clear_i(soft_rst), .tlb_flush_i(tlb_flush_q || stq_pt_write),
    .pt_base_i(pt_base_q), .dram_bytes_i,
    .req_valid_i(ldq_req_valid_q), .req_ready_o(ldq_req_ready), .req_va_i(ldq_req_va_q),
    .req_len_i(l_len_q), .req_row_i(ldq_req_row_q),
    .row_valid_o(ldq_row_valid), .row_data_o(ldq_row_data), .row_idx_o(ldq_row_idx),
    .row_len_o(ldq_row_len), .idle_o(ldq_idle), .err_o(ldq_err), .err_code_o(ldq_err_code),
    .err_addr_o(ldq_err_addr), .stall_o(ldq_stall),
    .mem_req_valid_o(ldq_mem_valid), .mem_req_ready_i(ldq_gnt), .mem_req_addr_o(ldq_mem_addr),
    .mem_req_beats_o(ldq_mem_beats), .mem_rsp_valid_i(ldq_rsp), .mem_rsp_data_i
  );

  // STORE's write path.
  logic          stq_req_valid_q, stq_req_ready;
  logic [31:0]   stq_req_va_q;
  logic [RB-1:0] stq_req_data_q;
  logic          stq_row_done, stq_idle, stq_err, stq_pt_write, stq_stall;
  logic [7:0]    stq_row_len, stq_err_code;
  logic [31:0]   stq_err_addr;
  logic          stq_mem_valid, stq_mem_write;
  logic [31:0]   stq_mem_addr;
  logic [int'(DMA_BEAT_BYTES)*8-1:0] stq_mem_wdata;
  logic [int'(DMA_BEAT_BYTES)-1:0]   stq_mem_wstrb;
  npu_stq #(.ROW_BYTES(ROW_BYTES), .BEAT_BYTES(BEAT_BYTES)) u_stq (
    .clk_i, .rst_ni, .hold_i, .clear_i(soft_rst), .tlb_flush_i(tlb_flush_q),
    .pt_base_i(pt_base_q), .dram_bytes_i,
    .req_valid_i(stq_req_valid_q), .req_ready_o(stq_req_ready), .req_va_i(stq_req_va_q),
    .req_len_i(s_len_q), .req_data_i(stq_req_data_q),
    .row_done_o(stq_row_done), .row_len_o(stq_row_len), .idle_o(stq_idle), .err_o(stq_err),
    .err_code_o(stq_err_code), .err_addr_o(stq_err_addr), .pt_write_o(stq_pt_write),
    .stall_o(stq_stall),
    .mem_req_valid_o(stq_mem_valid), .mem_req_ready_i(stq_gnt), .mem_req_write_o(stq_mem_write),
    .mem_req_addr_o(stq_mem_addr), .mem_req_wdata_o(stq_mem_wdata),
    .mem_req_wstrb_o(stq_mem_wstrb), .mem_rsp_valid_i(stq_rsp), .mem_rsp_data_i
  );

  // ------------------------------------------------------------------------------------------
  // Memory port (docs/rtl-timing.md "Memory port"): one request per edge. The fetch unit has priority;
  // LOAD and STORE alternate when both request (round robin), so neither starves the other.
  // Read data returns in request order, so a FIFO of (unit, beats) per accepted read burst
  // routes each returning beat to its unit. With latency 0 a burst's first beat returns on
  // its own accept edge, before the FIFO holds it.
  // ------------------------------------------------------------------------------------------
  logic       rr_stq_q;              // STORE wins the next LOAD/STORE contention
  logic [1:0] tag_unit_q [TAG_DEPTH];
  logic [7:0] tag_beats_q [TAG_DEPTH];
  logic [7:0] tag_hd_q, tag_tl_q;
  logic [8:0] tag_cnt_q;
  logic [7:0] tag_beat_q;            // beats of the head burst already returned
  logic       rd_acc;                // a read burst is accepted on this edge
  logic [1:0] rd_unit, rsp_unit;
  logic [7:0] rsp_beats;
  always_comb begin
    ifu_gnt = mem_req_ready_i && ifu_req_valid;
    ldq_gnt = mem_req_ready_i && !ifu_req_valid && ldq_mem_valid && (!stq_mem_valid || !rr_stq_q);
    stq_gnt = mem_req_ready_i && !ifu_req_valid && stq_mem_valid && (!ldq_mem_valid || rr_stq_q);
    mem_req_valid_o = ifu_req_valid || ldq_mem_valid || stq_mem_valid;
    mem_req_write_o = 1'b0;
    mem_req_addr_o = ifu_req_addr;
    mem_req_beats_o = ifu_req_beats;
    rd_unit = 2'd0;
    if (!ifu_req_valid && ldq_mem_valid && (!stq_mem_valid || !rr_stq_q)) begin
      mem_req_addr_o = ldq_mem_addr;
      mem_req_beats_o = ldq_mem_beats;
      rd_unit = 2'd1;
    end else if (!ifu_req_valid && stq_mem_valid) begin
      mem_req_write_o = stq_mem_write;
      mem_req_addr_o = stq_mem_addr;
      mem_req_beats_o = 8'd1;
      rd_unit = 2'd2;
    end
    mem_req_wdata_o = stq_mem_wdata;
    mem_req_wstrb_o = stq_mem_wstrb;
    rd_acc = mem_req_valid_o && mem_req_ready_i && !mem_req_write_o;
    st_inval = stq_gnt && stq_mem_write;
    rsp_unit = (tag_cnt_q != 0) ? tag_unit_q[tag_hd_q] : rd_unit;
    rsp_beats = (tag_cnt_q != 0) ? tag_beats_q[tag_hd_q] : mem_req_beats_o;
    ifu_rsp = mem_rsp_valid_i && rsp_unit == 2'd0;
    ldq_rsp = mem_rsp_valid_i && rsp_unit == 2'd1;
    stq_rsp = mem_rsp_valid_i && rsp_unit == 2'd2;
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni || soft_rst) begin
      rr_stq_q <= 1'b0;
      tag_hd_q <= '0;
      tag_tl_q <= '0;
      tag_cnt_q <= '0;
      tag_beat_q <= '0;
    end else if (!hold_i) begin
      logic push, pop;
      push = rd_acc;
      pop = 1'b0;
      if (ldq_gnt) rr_stq_q <= 1'b1;
      if (stq_gnt) rr_stq_q <= 1'b0;
      if (push) begin
        tag_unit_q[tag_tl_q] <= rd_unit;
        tag_beats_q[tag_tl_q] <= mem_req_beats_o;
        tag_tl_q <= tag_tl_q + 8'd1;
      end
      if (mem_rsp_valid_i) begin
        if (tag_beat_q + 8'd1 == rsp_beats) begin
          tag_beat_q <= '0;
          pop = 1'b1;
          tag_hd_q <= tag_hd_q + 8'd1;
        end else begin
          tag_beat_q <= tag_beat_q + 8'd1;
        end
      end
      tag_cnt_q <= tag_cnt_q + 9'(push) - 9'(pop);
    end
  end
  // ------------------------------------------------------------------------------------------
  // Ring selection, status, interrupt
  // ------------------------------------------------------------------------------------------
  logic          pending;
  logic [QW-1:0] pick;
  always_comb begin
    pending = 1'b0;
    pick = '0;
    for (int q = Q - 1; q >= 0; q--) begin
      if (ring_head_q[q] != ring_tail_q[q]) begin
        pending = 1'b1;
        pick = QW'(q);
      end
    end
  end

  logic halted;
  assign halted = (err_code_q != ERR_NONE);
  assign busy_o = (ds_q != D_IDLE) || (enable_q && !halted && pending);
  assign irq_o = (irq_status_q & irq_mask_q) != 0;

  // ------------------------------------------------------------------------------------------
  // Register read (combinational)
  // ------------------------------------------------------------------------------------------
  localparam logic [63:0] FPRINT = fingerprint_for_dim(N);
  always_comb begin
    logic [11:0] qoff;
    logic [7:0]  qi;
    logic [7:0]  ci;
    reg_rdata_o = '0;
    qoff = reg_addr_i - REG_QUEUE_BASE;
    qi = 8'(qoff / REG_QUEUE_STRIDE);
    ci = 8'((reg_addr_i - REG_COUNTER_BASE) >> 3);
    if (reg_addr_i >= REG_COUNTER_BASE) begin
      if (ci < NUM_CNT && reg_addr_i[1:0] == 2'b00)
        reg_rdata_o = reg_addr_i[2] ? cnt_q[ci[3:0]][63:32] : cnt_q[ci[3:0]][31:0];
    end else if (reg_addr_i >= REG_QUEUE_BASE) begin
      if (qi < 8'(Q)) begin
        unique case (qoff % REG_QUEUE_STRIDE)
          REG_QUEUE_RING_BASE:     reg_rdata_o = ring_base_q[qi[QW-1:0]];
          REG_QUEUE_RING_SIZE:     reg_rdata_o = ring_size_q[qi[QW-1:0]];
          REG_QUEUE_RING_HEAD:     reg_rdata_o = ring_head_q[qi[QW-1:0]];
          REG_QUEUE_RING_TAIL:     reg_rdata_o = ring_tail_q[qi[QW-1:0]];
          REG_QUEUE_COMPLETED_SEQ: reg_rdata_o = comp_seq_q[qi[QW-1:0]];
          default:                 reg_rdata_o = '0;
        endcase
      end
    end else begin
      unique case (reg_addr_i)
        REG_ID:             reg_rdata_o = DEVICE_ID;
        REG_VERSION:        reg_rdata_o = ISA_VERSION;
        REG_FINGERPRINT_LO: reg_rdata_o = FPRINT[31:0];
        REG_FINGERPRINT_HI: reg_rdata_o = FPRINT[63:32];
        REG_CONFIG:         reg_rdata_o = {20'h0, 4'(Q), 8'(N)};
        REG_CONTROL:        reg_rdata_o = enable_q ? CONTROL_ENABLE : 32'h0;
        REG_STATUS:         reg_rdata_o = (busy_o ? STATUS_BUSY : 32'h0) |
                                          (halted ? STATUS_ERROR : 32'h0) |
                                          (enable_q ? STATUS_ENABLED : 32'h0);
        REG_IRQ_STATUS:     reg_rdata_o = 32'(irq_status_q);
        REG_IRQ_MASK:       reg_rdata_o = 32'(irq_mask_q);
        REG_ERROR_CODE:     reg_rdata_o = 32'(err_code_q);
        REG_ERROR_ADDR:     reg_rdata_o = err_addr_q;
        REG_ERROR_QUEUE:    reg_rdata_o = 32'(err_queue_q);
        REG_ERROR_INSTR:    reg_rdata_o = err_instr_q;
        REG_ACT_SP_ROWS:    reg_rdata_o = ACT_ROWS;
        REG_WGT_SP_TILES:   reg_rdata_o = WGT_TILES;
        REG_ACC_SP_ROWS:    reg_rdata_o = ACC_ROWS;
        REG_RESET_COUNT:    reg_rdata_o = reset_count_q;
        default:            reg_rdata_o = '0;
      endcase
    end
  end

  // ------------------------------------------------------------------------------------------
  // Instruction fields
  // ------------------------------------------------------------------------------------------
  // Of the instruction being dispatched.
  logic [7:0] op;
  logic pop_prev, pop_next, push_prev, push_next;
  assign op = dw[0][7:0];
  assign pop_prev = dw[0][8];
  assign pop_next = dw[0][9];
  assign push_prev = dw[0][10];
  assign push_next = dw[0][11];

  // Engine of the instruction: 0 LOAD, 1 COMPUTE, 2 STORE (3 = invalid SYNC target).
  function automatic logic [1:0] engine_of(input logic [7:0] opc, input logic [1:0] sync_eng);
    unique case (opc)
      OP_LOAD:  return 2'd0;
      OP_STORE: return 2'd2;
      OP_SYNC:  return sync_eng;
      default:  return 2'd1;
    endcase
  endfunction

  function automatic logic illegal_instr(input logic [31:0] w [8]);
    logic [1:0] eng;
    logic bad;
    eng = engine_of(w[0][7:0], w[0][17:16]);
    bad = (w[0][15:12] != 0);
    // LOAD has no prev channel, STORE no next channel.
    if (eng == 2'd0 && (w[0][8] || w[0][10])) bad = 1'b1;
    if (eng == 2'd2 && (w[0][9] || w[0][11])) bad = 1'b1;
    unique case (w[0][7:0])
      OP_NOP: bad |= (w[0][31:16] != 0) || (w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0;
      OP_SYNC: bad |= (w[0][31:18] != 0) || (w[0][17:16] == 2'd3) ||
                      (w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0;
      OP_LOAD, OP_STORE: begin
        // Bit 18 `wide` (ISA 1.4) moves wide rows, which exist in ACT only.
        bad |= (w[0][17:16] == 2'd3) || (w[0][23:19] != 0) || (32'(w[0][31:24]) > N);
        bad |= w[0][18] && w[0][17:16] != SP_ACT[1:0];
        bad |= (w[3][15:0] == 0) || (w[3][31:16] == 0) || (w[4][15:0] == 0);
        if (w[0][7:0] == OP_STORE) bad |= (w[4][31:16] != 0);
      end
      // Bit 17 `wide` (ISA 1.4): wide activation operands.
      OP_GEMM: bad |= (w[0][31:18] != 0) || (w[2][31:16] == 0) || (w[3][15:0] == 0) ||
                      (w[3][31:16] == 0);
      OP_VEC: begin
        // Fields a mode does not use must be zero; window modes need kw, kh >= 1.
        logic [3:0] md;
        md = w[0][19:16];
        bad |= (w[0][31:24] != 0) || (w[3][31:24] != 0) || (w[2][31:16] == 0) ||
               (w[3][15:0] == 0) || (md > VEC_DWCONV[3:0] && md != VEC_SOFTMAX[3:0]);
        // wide_src (bit 22) and wide_dst (bit 23), ISA 1.4: wide sources in DWCONV and LUT,
        // wide results in REQUANT, DWCONV and a LUT with a wide source; never with wrap.
        if (w[0][22]) bad |= !(md == VEC_DWCONV[3:0] || md == VEC_LUT[3:0]) || w[0][21];
        if (w[0][23])
          bad |= !(md == VEC_REQUANT[3:0] || md == VEC_DWCONV[3:0] ||
                   (md == VEC_LUT[3:0] && w[0][22])) || w[0][21];
        // wrap (ISA 1.2): REQUANT, ADD and MUL only, with clamp low = high = 0.
        if (w[0][21])
          bad |= !(md == VEC_REQUANT[3:0] || md == VEC_ADD[3:0] || md == VEC_MUL[3:0]) ||
                 (w[6][15:0] != 0);
        // SOFTMAX's w7: shift in 5:0, tail lanes (at most N) in 15:8.
        if (md == VEC_SOFTMAX[3:0]) bad |= ((w[7] & 32'hFFFF00C0) != 0) || (32'(w[7][15:8]) > N);
        else bad |= vec_window(md) ? (w[7][7:0] == 0 || w[7][15:8] == 0) : (w[7] != 0);
        unique case (md)
          VEC_REQUANT[3:0]: bad |= (w[6][31:16] != 0);
          VEC_LUT[3:0]:     bad |= (w[6][31:16] != 0) || w[0][20];
          VEC_ADD[3:0], VEC_MUL[3:0]: bad |= w[0][20];
          VEC_MAXPOOL[3:0]: bad |= (w[6][31:16] != 0) || w[0][20] || (w[2][15:0] != 0);
          VEC_AVGPOOL[3:0]: bad |= (w[6][31:16] != 0) || w[0][20];
          VEC_SOFTMAX[3:0]: bad |= (w[6][31:16] != 0) || w[0][20];
          default: ;
        endcase
      end
      default: bad = 1'b1;
    endcase
    return bad;
  endfunction

  // Token channels used by each token bit of an instruction on engine `eng`.
  function automatic logic [1:0] ch_pop_prev(input logic [1:0] eng);
    return (eng == 2'd1) ? 2'd0 : 2'd2;     // COMPUTE pops L->C, STORE pops C->S
  endfunction
  function automatic logic [1:0] ch_pop_next(input logic [1:0] eng);
    return (eng == 2'd0) ? 2'd1 : 2'd3;     // LOAD pops C->L, COMPUTE pops S->C
  endfunction
  function automatic logic [1:0] ch_push_prev(input logic [1:0] eng);
    return (eng == 2'd1) ? 2'd1 : 2'd3;     // COMPUTE pushes C->L, STORE pushes S->C
  endfunction
  function automatic logic [1:0] ch_push_next(input logic [1:0] eng);
    return (eng == 2'd0) ? 2'd0 : 2'd2;     // LOAD pushes L->C, COMPUTE pushes C->S
  endfunction

  function automatic logic [63:0] sp_rows(input logic [1:0] sp);
    unique case (sp)
      SP_ACT[1:0]: return 64'(ACT_ROWS);
      SP_WGT[1:0]: return 64'(WGT_ROWS);
      default: return 64'(ACC_ROWS);
    endcase
  endfunction

  function automatic logic vec_window(input logic [3:0] md);
    return md == VEC_MAXPOOL[3:0] || md == VEC_AVGPOOL[3:0] || md == VEC_DWCONV[3:0];
  endfunction

  // Setup cycles of a VEC mode before its first row (parameter / table reads; a LUT with a
  // wide source reads the 257 int16 entries of the interpolated table, ISA 1.4).
  function automatic logic [15:0] vec_setup(input logic [3:0] md, input logic wide_src);
    if (md == VEC_LUT[3:0] && wide_src) return 16'(1 + WLUT_PAIRS);
    if (md == VEC_LUT[3:0] || md == VEC_SOFTMAX[3:0]) return 16'(1 + LUT_ROWS);
    if (md == VEC_ADD[3:0] || md == VEC_MUL[3:0]) return 16'd2;
    return 16'd3;
  endfunction

  // The VEC rounding shift (64-bit two's complement) and clamp (low bound first).
  function automatic logic signed [63:0] vec_rq(input logic signed [63:0] t, input logic [5:0] s);
    return (s != 0) ? (t + (64'sd1 <<< (s - 6'd1))) >>> s : t;
  endfunction
  function automatic logic [7:0] vec_clamp(input logic signed [63:0] t, input logic [7:0] lo,
                                           input logic [7:0] hi);
    if (t < 64'($signed(lo))) return lo;
    if (t > 64'($signed(hi))) return hi;
    return t[7:0];
  endfunction
  // The clamp of a wide result (ISA 1.4): the int8 bounds refined to the 8.8 grid,
  // [256·low, 256·high + 255], low bound first.
  function automatic logic [15:0] vec_clamp16(input logic signed [63:0] t, input logic [7:0] lo,
                                              input logic [7:0] hi);
    logic signed [63:0] lo16, hi16;
    lo16 = 64'($signed(lo)) * 64'sd256;
    hi16 = 64'($signed(hi)) * 64'sd256 + 64'sd255;
    if (t < lo16) return lo16[15:0];
    if (t > hi16) return hi16[15:0];
    return t[15:0];
  endfunction
  // The N int8 lanes of a row sign-extended to the int16 lanes of a wide row.
  function automatic logic [N*16-1:0] widen_row(input logic [N*8-1:0] x);
    logic [N*16-1:0] out;
    for (int n = 0; n < N; n++) out[n*16 +: 16] = 16'($signed(x[n*8 +: 8]));
    return out;
  endfunction
  // The final result of REQUANT / ADD / MUL: with `wrap` the low byte of t (integer modular
  // arithmetic), else the clamp.
  function automatic logic [7:0] vec_finish(input logic signed [63:0] t, input logic wrap,
                                            input logic [7:0] lo, input logic [7:0] hi);
    if (wrap) return t[7:0];
    return vec_clamp(t, lo, hi);
  endfunction

  // LUT: table entry x + 128 of the 256-entry table (entry e at bits 8e+7:8e).
  function automatic logic [N*8-1:0] lut_row(input logic [N*8-1:0] x, input logic [2047:0] tbl,
                                             input logic [7:0] lo, input logic [7:0] hi);
    logic [N*8-1:0] out;
    for (int n = 0; n < N; n++) begin
      logic [7:0] e;
      e = x[n*8 +: 8] ^ 8'h80;
      out[n*8 +: 8] = vec_clamp(64'($signed(tbl[e*8 +: 8])), lo, hi);
    end
    return out;
  endfunction

  // LUT with a wide source (ISA 1.4): the interpolated 257-entry int16 table (entry e at
  // bits 16e+15:16e). x = 256·(i − 128) + f, v = 256·T[i] + (T[i+1] − T[i])·f is x's value on
  // the 8.8 grid times 256; it is rounded (half up) to the int8 grid, or with wide_dst to
  // the 8.8 grid (clamp16). Returns the destination bytes: N int8, or N int16 with wide_dst.
  function automatic logic [N*16-1:0] lut_wide_row(input logic [N*16-1:0] x,
                                                   input logic [WLUT_BITS-1:0] tbl,
                                                   input logic wide_dst, input logic [7:0] lo,
                                                   input logic [7:0] hi);
    logic [N*16-1:0] out;
    out = '0;
    for (int n = 0; n < N; n++) begin
      logic [31:0] i;
      logic signed [63:0] t0, t1, v;
      i = {24'd0, x[n*16 + 8 +: 8] ^ 8'h80};        // (x >> 8) + 128, 0..255
      t0 = 64'($signed(tbl[i * 16 +: 16]));
      t1 = 64'($signed(tbl[(i + 32'd1) * 16 +: 16]));
      v = t0 * 64'sd256 + (t1 - t0) * 64'(x[n*16 +: 8]);   // |v| < 2^25
      if (wide_dst) out[n*16 +: 16] = vec_clamp16((v + 64'sd128) >>> 8, lo, hi);
      else out[n*8 +: 8] = vec_clamp((v + 64'sd32768) >>> 16, lo, hi);
    end
    return out;
  endfunction

  // SOFTMAX (ISA 1.3): the first `lanes` lanes of a row are the segment's elements.
  function automatic logic signed [7:0] sm_row_max(input logic [N*8-1:0] x, input logic [7:0] lanes,
                                                   input logic signed [7:0] m0);
    logic signed [7:0] m;
    m = m0;
    for (int n = 0; n < N; n++)
      if (8'(n) < lanes && $signed(x[n*8 +: 8]) > m) m = $signed(x[n*8 +: 8]);
    return m;
  endfunction
  // Table entry x - m + 255 (0..255 for an element of a segment whose maximum is m).
  function automatic logic signed [31:0] sm_exp(input logic [7:0] x, input logic signed [7:0] m,
                                                input logic [8191:0] tbl);
    logic [7:0] e;
    e = x - m + 8'd255;  // modulo 256: x - m + 255 itself for x <= m
    return $signed(tbl[32'(e) * 32 +: 32]);
  endfunction
  function automatic logic signed [63:0] sm_row_sum(input logic [N*8-1:0] x, input logic [8191:0] tbl,
                                                    input logic signed [7:0] m, input logic [7:0] lanes);
    logic signed [63:0] s;
    s = '0;
    for (int n = 0; n < N; n++)
      if (8'(n) < lanes) s = s + 64'(sm_exp(x[n*8 +: 8], m, tbl));
    return s;
  endfunction
  function automatic logic [N*8-1:0] sm_row_out(input logic [N*8-1:0] x, input logic [8191:0] tbl,
                                                input logic signed [7:0] m, input logic [63:0] q,
                                                input logic [7:0] lanes, input logic [5:0] sh,
                                                input logic [7:0] zp, input logic [7:0] lo,
                                                input logic [7:0] hi);
    logic [N*8-1:0] out;
    for (int n = 0; n < N; n++) begin
      logic signed [63:0] e, t;
      e = (8'(n) < lanes) ? 64'(sm_exp(x[n*8 +: 8], m, tbl)) : 64'sd0;
      t = e * $signed(q);
      out[n*8 +: 8] = vec_clamp(vec_rq(t, sh) + 64'($signed(zp)), lo, hi);
    end
    return out;
  endfunction

  // ADD / MUL with the scalars of ACC row P: lane 0 m0, 1 m1, 2 s, 3 za, 4 zb.
  function automatic logic [N*8-1:0] addmul_row(input logic mul, input logic [N*8-1:0] a,
                                                input logic [N*8-1:0] b, input logic [159:0] par,
                                                input logic [7:0] zp, input logic wrap,
                                                input logic [7:0] lo, input logic [7:0] hi);
    logic [N*8-1:0] out;
    logic signed [63:0] m0, m1, za, zb;
    m0 = 64'($signed(par[31:0]));
    m1 = 64'($signed(par[63:32]));
    za = 64'($signed(par[127:96]));
    zb = 64'($signed(par[159:128]));
    for (int n = 0; n < N; n++) begin
      logic signed [63:0] av, bv, t;
      av = 64'($signed(a[n*8 +: 8])) - za;
      bv = 64'($signed(b[n*8 +: 8])) - zb;
      t = mul ? av * bv * m0 : av * m0 + bv * m1;
      out[n*8 +: 8] = vec_finish(vec_rq(t, par[69:64]) + 64'($signed(zp)), wrap, lo, hi);
    end
    return out;
  endfunction

  // One window element into the per-lane accumulators (MAXPOOL max, AVGPOOL sum, DWCONV sum of
  // products; int32, wrapping only for DWCONV's int16 x int8 products of a wide source). The
  // element's lanes are int16: int8 rows are sign-extended (widen_row).
  function automatic logic [N*32-1:0] window_step(input logic [3:0] md, input logic first,
                                                  input logic [N*32-1:0] acc,
                                                  input logic [N*16-1:0] x,
                                                  input logic [N*8-1:0] w);
    logic [N*32-1:0] out;
    for (int n = 0; n < N; n++) begin
      logic signed [31:0] xv, av;
      xv = 32'($signed(x[n*16 +: 16]));
      av = $signed(acc[n*32 +: 32]);
      if (md == VEC_MAXPOOL[3:0]) out[n*32 +: 32] = (first || xv > av) ? xv : av;
      else if (md == VEC_AVGPOOL[3:0]) out[n*32 +: 32] = (first ? 32'sd0 : av) + xv;
      else out[n*32 +: 32] = (first ? 32'sd0 : av) + xv * 32'($signed(w[n*8 +: 8]));
    end
    return out;
  endfunction

  // The window read ports (ISA 1.3): WIN consecutive ACT rows from a and WIN consecutive WGT
  // rows from w in one cycle. Consecutive rows lie in distinct banks of a scratchpad
  // interleaved by row address (row mod WIN), so the WIN reads never conflict. Addresses wrap
  // at the scratchpad size (a power of two); rows past the window row are read but unused.
  function automatic logic [N*8-1:0] act_row_at(input logic [AAW-1:0] a);
    return (act_tag[a] == epoch_q) ? act_mem[a] : '0;
  endfunction
  function automatic logic [N*8-1:0] wgt_row_at(input logic [WAW-1:0] a);
    return (wgt_tag[a] == epoch_q) ? wgt_mem[a] : '0;
  endfunction
  assign act_rd16 = {act_row_at(act_ra_q + 1'b1), act_rd};

  // Up to WIN window elements (kx .. kx + cnt - 1 of one window row, ACT rows from a, DWCONV
  // weights from WGT rows from w) into the per-lane accumulators in one cycle; first = the
  // group starts the window. Max and integer sums do not depend on the order, so the result
  // is the one-element-per-cycle result of ISA 1.2 bit for bit. With a wide source (ISA 1.4)
  // element j is the wide row at a + 2j: 2·WIN rows hold the WIN16 = WIN wide elements.
  function automatic logic [N*32-1:0] window_group(input logic [3:0] md, input logic first,
                                                   input logic [N*32-1:0] acc,
                                                   input logic [AAW-1:0] a,
                                                   input logic [WAW-1:0] w,
                                                   input logic [15:0] cnt, input logic wide);
    logic [N*32-1:0] out;
    out = acc;
    for (int j = 0; j < int'(WIN); j++) begin
      if (16'(j) < cnt) begin
        logic [N*16-1:0] x;
        if (wide) x = {act_row_at(a + AAW'(2 * j + 1)), act_row_at(a + AAW'(2 * j))};
        else x = widen_row(act_row_at(a + AAW'(j)));
        out = window_step(md, first && j == 0, out, x, wgt_row_at(w + WAW'(j)));
      end
    end
    return out;
  endfunction

  // MAXPOOL / AVGPOOL result of a finished window (DWCONV goes through requant_row).
  function automatic logic [N*8-1:0] pool_row(input logic [3:0] md, input logic [N*32-1:0] acc,
                                              input logic [159:0] par, input logic [15:0] khkw,
                                              input logic [7:0] zp, input logic [7:0] lo,
                                              input logic [7:0] hi);
    logic [N*8-1:0] out;
    logic signed [63:0] m0, za;
    m0 = 64'($signed(par[31:0]));
    za = 64'($signed(par[127:96]));
    for (int n = 0; n < N; n++) begin
      logic signed [63:0] v;
      v = 64'($signed(acc[n*32 +: 32]));
      if (md == VEC_MAXPOOL[3:0]) out[n*8 +: 8] = vec_clamp(v, lo, hi);
      else out[n*8 +: 8] = vec_clamp(vec_rq((v - 64'(khkw) * za) * m0, par[69:64]) +
                                     64'($signed(zp)), lo, hi);
    end
    return out;
  endfunction

  // p[n] = sum_k a[k] * W[k][n], int8 (or with a wide operand, ISA 1.4, int16) x int8 ->
  // int32, wrapping. a holds int16 lanes (int8 rows sign-extended by widen_row).
  function automatic logic [N*32-1:0] mac_row(input logic [N*16-1:0] a,
                                              input logic [N*N*8-1:0] w);
    logic [N*32-1:0] p;
    // k outer, columns inner: the generated C++ updates consecutive words (vectorisable).
    p = '0;
    for (int k = 0; k < N; k++) begin
      logic [31:0] ak;
      ak = 32'($signed(a[k*16 +: 16]));
      for (int n = 0; n < N; n++) begin
        p[n*32 +: 32] = p[n*32 +: 32] + ak * 32'($signed(w[(k*N+n)*8 +: 8]));
      end
    end
    return p;
  endfunction

  function automatic logic [N*32-1:0] add_rows(input logic [N*32-1:0] x,
                                               input logic [N*32-1:0] y);
    logic [N*32-1:0] s;
    for (int n = 0; n < N; n++) s[n*32 +: 32] = x[n*32 +: 32] + y[n*32 +: 32];
    return s;
  endfunction

  // VEC REQUANT of one row (round half toward +inf, then zero point and clamp, or with
  // `wrap` the low byte). Returns the destination bytes: N int8, or with wide_dst (ISA 1.4)
  // N int16 with the zero point and the clamp refined to the 8.8 grid (256·zp, vec_clamp16).
  function automatic logic [N*16-1:0] requant_row(
      input logic [N*32-1:0] src, input logic [N*32-1:0] bias, input logic [N*32-1:0] mul,
      input logic [N*32-1:0] shift, input logic [7:0] zp, input logic wrap, input logic wide_dst,
      input logic [7:0] lo, input logic [7:0] hi);
    logic [N*16-1:0] out;
    out = '0;
    for (int n = 0; n < N; n++) begin
      logic signed [31:0] v;
      logic signed [63:0] t;
      logic [5:0] s;
      v = $signed(src[n*32 +: 32] + bias[n*32 +: 32]);
      s = shift[n*32 +: 6];
      t = 64'(v) * 64'($signed(mul[n*32 +: 32]));
      if (s != 0) t = (t + (64'sd1 <<< (s - 6'd1))) >>> s;
      // Low bound first: low > high yields low (architecture.md 1.4).
      if (wide_dst) out[n*16 +: 16] = vec_clamp16(t + 64'($signed(zp)) * 64'sd256, lo, hi);
      else out[n*8 +: 8] = vec_finish(t + 64'($signed(zp)), wrap, lo, hi);
    end
    return out;
  endfunction

  // GEMM helpers (combinational on registered state). The loaded tile itself (wl_next) is
  // computed inside the clocked block so that it costs nothing outside GEMM.
  logic             wl_full;         // the tile is complete after this cycle
  logic [15:0]      g_next_o, g_next_i;
  logic             g_next_v;        // a block follows (lz_q, ly_q)
  always_comb begin
    wl_full = (k_q + (wl_run_q ? 16'd1 : 16'd0)) == 16'(N);
    if (ly_q + 16'd1 < iw[3][31:16]) begin
      g_next_o = lz_q;
      g_next_i = ly_q + 16'd1;
    end else begin
      g_next_o = lz_q + 16'd1;
      g_next_i = '0;
    end
    g_next_v = g_next_o < iw[3][15:0];
  end

  // Weight tile index of GEMM block (o, i).
  function automatic logic [31:0] g_tile(input logic [15:0] o, input logic [15:0] i);
    return 32'(iw[1][31:16]) + 32'(o) * 32'(iw[7][15:0]) + 32'(i) * 32'(iw[7][31:16]);
  endfunction

  // ------------------------------------------------------------------------------------------
  // Engine issue conditions (combinational on registered state)
  // ------------------------------------------------------------------------------------------
  function automatic logic overlaps(input logic [33:0] alo, input logic [33:0] ahi,
                                    input logic [33:0] blo, input logic [33:0] bhi);
    return alo < bhi && blo < ahi;
  endfunction

  eq_t         h_e [3];              // head entry of each engine's queue
  logic [2:0]  h_v, h_drop, h_go, h_tokwait;
  logic        fetch_hold;
  logic [33:0] f_lo, f_hi;
  always_comb begin
    logic ld_haz, st_haz;
    for (int e = 0; e < 3; e++) begin
      logic [1:0] eg;
      logic       tok_ok;
      eg = 2'(e);
      h_e[e] = eq_q[e][eq_hd_q[e]];
      h_v[e] = eq_v_q[e][eq_hd_q[e]];
      // After the first error, instructions later in program order are dropped.
      h_drop[e] = h_v[e] && perr_v_q && h_e[e].pc > perr_pc_q;
      tok_ok = (!h_e[e].w[8] || tok_av_q[ch_pop_prev(eg)] != 0) &&
               (!h_e[e].w[9] || tok_av_q[ch_pop_next(eg)] != 0);
      h_tokwait[e] = h_v[e] && !h_drop[e] && !tok_ok;
      h_go[e] = h_v[e] && !h_drop[e] && tok_ok;
    end
    // DRAM hazards: a LOAD waits for every earlier STORE with an overlapping VA range that is
    // queued or running, a STORE for every such earlier LOAD.
    ld_haz = (ss_q != T_IDLE) && s_pc_q < h_e[0].pc &&
             overlaps(s_lo_q, s_hi_q, h_e[0].lo, h_e[0].hi);
    st_haz = (ls_q != L_IDLE) && l_pc_q < h_e[2].pc &&
             overlaps(l_lo_q, l_hi_q, h_e[2].lo, h_e[2].hi);
    for (int j = 0; j < int'(EQ_DEPTH); j++) begin
      if (eq_v_q[2][j] && eq_q[2][j].pc < h_e[0].pc &&
          overlaps(eq_q[2][j].lo, eq_q[2][j].hi, h_e[0].lo, h_e[0].hi))
        ld_haz = 1'b1;
      if (eq_v_q[0][j] && eq_q[0][j].pc < h_e[2].pc &&
          overlaps(eq_q[0][j].lo, eq_q[0][j].hi, h_e[2].lo, h_e[2].hi))
        st_haz = 1'b1;
    end
    if (ld_haz) h_go[0] = 1'b0;
    if (st_haz) h_go[2] = 1'b0;
    // Instruction fetch waits while a (necessarily earlier) STORE that may write the
    // instruction is queued or running.
    f_lo = {2'b00, cb_va_q + pc_q};
    f_hi = f_lo + 34'd32;
    fetch_hold = (ss_q != T_IDLE) && overlaps(s_lo_q, s_hi_q, f_lo, f_hi);
    for (int j = 0; j < int'(EQ_DEPTH); j++)
      if (eq_v_q[2][j] && overlaps(eq_q[2][j].lo, eq_q[2][j].hi, f_lo, f_hi)) fetch_hold = 1'b1;
  end

  // Bytes a LOAD or STORE moves per (z, y, x): row_elems (0 = N) elements of 1 byte (ACT, WGT),
  // 2 bytes (a wide ACT row, ISA 1.4) or 4 bytes (ACC).
  // Arguments: w0[31:24] (row_elems), w0[18:16] (wide, scratchpad).
  function automatic logic [7:0] dma_row_bytes(input logic [7:0] row_elems, input logic [2:0] mode);
    logic [7:0] elems;
    elems = (row_elems == 0) ? 8'(N) : row_elems;
    if (mode[1:0] == SP_ACC[1:0]) return elems << 2;
    return elems << mode[2];
  endfunction

  // DRAM VA range of a LOAD or STORE: [va, va + sum (count-1)*stride + row bytes), the whole
  // 32-bit space when it wraps; empty for the other instructions.
  function automatic logic [67:0] dram_range(input logic [31:0] w [8]);
    logic [63:0] ext;
    logic [33:0] lo, hi;
    logic [7:0]  len;
    lo = '0;
    hi = '0;
    if (w[0][7:0] == OP_LOAD || w[0][7:0] == OP_STORE) begin
      len = dma_row_bytes(w[0][31:24], w[0][18:16]);
      ext = 64'(w[1]) + (64'(w[4][15:0]) - 64'd1) * 64'(w[7]) +
            (64'(w[3][31:16]) - 64'd1) * 64'(w[6]) + (64'(w[3][15:0]) - 64'd1) * 64'(w[5]) +
            64'(len);
      if (ext > 64'h1_0000_0000) begin
        lo = '0;
        hi = 34'h1_0000_0000;
      end else begin
        lo = 34'(w[1]);
        hi = 34'(ext);
      end
    end
    return {lo, hi};
  endfunction

  // ------------------------------------------------------------------------------------------
  // Command processor, dispatcher and engines
  // ------------------------------------------------------------------------------------------
  always_ff @(posedge clk_i) begin
    if (!rst_ni || soft_rst) begin
      // Power-on values. A soft reset also counts itself and clears the scratchpads.
      reset_count_q <= !rst_ni ? 32'd0 : reset_count_q + 32'd1;
      epoch_q <= !rst_ni ? 32'd1 : epoch_q + 32'd1;
      ds_q <= D_IDLE;
      ls_q <= L_IDLE;
      ss_q <= T_IDLE;
      cs_q <= C_IDLE;
      enable_q <= 1'b0;
      irq_status_q <= '0;
      irq_mask_q <= '0;
      err_code_q <= ERR_NONE;
      err_addr_q <= '0;
      err_queue_q <= '0;
      err_instr_q <= '0;
      for (int q = 0; q < Q; q++) begin
        ring_base_q[q] <= '0;
        ring_size_q[q] <= '0;
        ring_head_q[q] <= '0;
        ring_tail_q[q] <= '0;
        comp_seq_q[q] <= '0;
      end
      for (int c = 0; c < NUM_COUNTERS; c++) cnt_q[c] <= '0;
      for (int t = 0; t < 4; t++) begin
        tok_q[t] <= '0;
        tok_av_q[t] <= '0;
      end
      for (int e = 0; e < 3; e++) begin
        eq_v_q[e] <= '0;
        eq_hd_q[e] <= '0;
        eq_tl_q[e] <= '0;
      end
      perr_v_q <= 1'b0;
      ifu_start_q <= 1'b0;
      tlb_flush_q <= 1'b0;
      trace_valid_o <= '0;
      wl_run_q <= 1'b0;
      ldq_req_valid_q <= 1'b0;
      stq_req_valid_q <= 1'b0;
    end else begin
      logic [8:0] irq_next;
      logic       raise;             // ring-level error (no job running)
      logic [7:0] r_code;
      logic [31:0] r_addr;
      logic [QW-1:0] r_queue;
      logic       g_swap;
      // First error in program order, updated by the candidates of this edge.
      logic        pv;
      logic [7:0]  pcode;
      logic [31:0] paddr, ppc;
      logic [8:0]  tav [4];
      logic [1:0]  ndone;
      logic [2:0]  pop_e;            // engine queue heads consumed on this edge

      raise = 1'b0;
      r_code = ERR_NONE;
      r_addr = '0;
      r_queue = q_q;
      g_swap = 1'b0;
      irq_next = irq_status_q;
      pv = perr_v_q;
      pcode = perr_code_q;
      paddr = perr_addr_q;
      ppc = perr_pc_q;
      for (int t = 0; t < 4; t++) tav[t] = tok_av_q[t];
      ndone = '0;
      pop_e = '0;

      // Register writes.
      if (reg_valid_i && reg_write_i) begin
        if (reg_addr_i == REG_CONTROL) enable_q <= (reg_wdata_i & CONTROL_ENABLE) != 0;
        if (reg_addr_i == REG_IRQ_STATUS) irq_next = irq_next & ~reg_wdata_i[8:0];
        if (reg_addr_i == REG_IRQ_MASK) irq_mask_q <= reg_wdata_i[8:0] & IRQ_BITS;
        if (reg_addr_i >= REG_QUEUE_BASE && reg_addr_i < REG_QUEUE_BASE + 12'(Q) * REG_QUEUE_STRIDE) begin
          logic [11:0] qoff;
          logic [QW-1:0] qi;
          qoff = reg_addr_i - REG_QUEUE_BASE;
          qi = QW'(qoff / REG_QUEUE_STRIDE);
          unique case (qoff % REG_QUEUE_STRIDE)
            // Reprogramming a ring empties it (as the functional model does).
            REG_QUEUE_RING_BASE: begin
              ring_base_q[qi] <= reg_wdata_i;
              ring_head_q[qi] <= '0;
              ring_tail_q[qi] <= '0;
            end
            REG_QUEUE_RING_SIZE: begin
              ring_size_q[qi] <= reg_wdata_i;
              ring_head_q[qi] <= '0;
              ring_tail_q[qi] <= '0;
            end
            REG_QUEUE_RING_TAIL: ring_tail_q[qi] <= reg_wdata_i;
            default: ;
          endcase
        end
      end

      if (!hold_i) begin
        ifu_start_q <= 1'b0;
        tlb_flush_q <= 1'b0;
        trace_valid_o <= '0;

        // GEMM weight loader: one WGT row per cycle into wnext_q while wl_run_q.
        if (wl_run_q) begin
          wnext_q <= {wgt_rd, wnext_q[N*N*8-1:N*8]};
          wgt_ra_q <= wgt_ra_q + 1'b1;
          k_q <= k_q + 16'd1;
          if (wl_full) wl_run_q <= 1'b0;
        end

        // Counters that depend only on the engine states.
        cnt_q[CNT_CYCLES] <= cnt_q[CNT_CYCLES] + 64'd1;
        if (ls_q != L_IDLE) cnt_q[CNT_BUSY_LOAD] <= cnt_q[CNT_BUSY_LOAD] + 64'd1;
        if (cs_q != C_IDLE) cnt_q[CNT_BUSY_COMPUTE] <= cnt_q[CNT_BUSY_COMPUTE] + 64'd1;
        if (ss_q != T_IDLE) cnt_q[CNT_BUSY_STORE] <= cnt_q[CNT_BUSY_STORE] + 64'd1;
        if ((ls_q == L_IDLE && h_tokwait[0]) || (cs_q == C_IDLE && h_tokwait[1]) ||
            (ss_q == T_IDLE && h_tokwait[2]))
          cnt_q[CNT_STALL_TOKEN] <= cnt_q[CNT_STALL_TOKEN] + 64'd1;
        if (ifu_stall || stq_stall || (ls_q == L_ROW && ldq_stall && !ldq_row_valid))
          cnt_q[CNT_STALL_MEM] <= cnt_q[CNT_STALL_MEM] + 64'd1;

        // ========================================================== command processor
        unique case (ds_q)
          D_IDLE: begin
            if (enable_q && !halted && pending && !ifu_busy) begin
              logic [32:0] pa;
              logic [31:0] size;
              q_q <= pick;
              size = ring_size_q[pick];
              pa = {1'b0, ring_base_q[pick]} + {1'b0, ring_head_q[pick]};
              entry_pa_q <= pa[31:0];
              r_queue = pick;
              // A ring whose registers break the rules of 1.3 cannot be read: BAD_RING_ENTRY.
              if (ring_base_q[pick][4:0] != 0 || size < 32'd64 || (size & (size - 1)) != 0 ||
                  ring_tail_q[pick] >= size || ring_tail_q[pick][4:0] != 0 ||
                  ring_head_q[pick] >= size) begin
                raise = 1'b1;
                r_code = ERR_BAD_RING_ENTRY;
                r_addr = pa[31:0];
              end else if (pa[32]) begin
                raise = 1'b1;
                r_code = ERR_BUS_ERROR;
                r_addr = pa[31:0];
              end else begin
                ifu_start_q <= 1'b1;
                ifu_phys_q <= 1'b1;
                ifu_addr_q <= pa[31:0];
                ds_q <= D_RING_WAIT;
              end
            end
          end

          D_RING_WAIT: begin
            if (ifu_done) begin
              if (ifu_err) begin
                raise = 1'b1;
                r_code = ifu_err_code;
                r_addr = ifu_err_addr;
              end else begin
                for (int i = 0; i < 8; i++) dw[i] <= ifu_data[i*32 +: 32];
                ds_q <= D_RING_DEC;
              end
            end
          end

          D_RING_DEC: begin
            // dw holds the ring entry here.
            unique case (dw[0][7:0])
              RING_OP_NOP: begin
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
                ds_q <= D_IDLE;
              end
              RING_OP_FENCE: begin
                comp_seq_q[q_q] <= dw[1];
                irq_next = irq_next | (9'd1 << q_q);
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
                ds_q <= D_IDLE;
              end
              RING_OP_EXEC: begin
                if (dw[1][4:0] != 0 || dw[2][4:0] != 0 || dw[2] == 0 || dw[3][1:0] != 0) begin
                  raise = 1'b1;
                  r_code = ERR_BAD_RING_ENTRY;
                  r_addr = entry_pa_q;
                end else begin
                  cb_va_q <= dw[1];
                  cb_len_q <= dw[2];
                  pt_base_q <= dw[3];
                  pc_q <= '0;
                  for (int t = 0; t < 4; t++) begin
                    tok_q[t] <= '0;
                    tav[t] = '0;
                  end
                  pv = 1'b0;
                  tlb_flush_q <= 1'b1;
                  ds_q <= D_FETCH;
                end
              end
              default: begin
                raise = 1'b1;
                r_code = ERR_BAD_RING_ENTRY;
                r_addr = entry_pa_q;
              end
            endcase
          end

          // ------------------------------------------------------------ fetch and dispatch
          D_FETCH: begin
            if (perr_v_q) begin
              ds_q <= D_DRAIN;
            end else if (!fetch_hold) begin
              ifu_start_q <= 1'b1;
              ifu_phys_q <= 1'b0;
              ifu_addr_q <= cb_va_q + pc_q;
              ds_q <= D_FETCH_WAIT;
            end
          end

          D_FETCH_WAIT: begin
            if (ifu_done) begin
              if (perr_v_q) begin
                ds_q <= D_DRAIN;
              end else if (ifu_err) begin
                if (!pv) begin
                  pv = 1'b1;
                  pcode = ifu_err_code;
                  paddr = ifu_err_addr;
                  ppc = pc_q;
                end
                ds_q <= D_DRAIN;
              end else begin
                for (int i = 0; i < 8; i++) dw[i] <= ifu_data[i*32 +: 32];
                ds_q <= D_DECODE;
              end
            end
          end

          D_DECODE: begin
            logic [1:0] eng;
            logic       bad;
            logic [7:0] bcode;
            logic [31:0] baddr;
            eng = engine_of(dw[0][7:0], dw[0][17:16]);
            bad = 1'b1;
            bcode = ERR_NONE;
            baddr = '0;
            if (illegal_instr(dw)) begin
              bcode = ERR_ILLEGAL_INSTRUCTION;
              baddr = cb_va_q + pc_q;
            end else if (pop_prev && tok_q[ch_pop_prev(eng)] == 0) begin
              bcode = ERR_TOKEN_DEADLOCK;
              baddr = 32'(ch_pop_prev(eng));
            end else if (pop_next && tok_q[ch_pop_next(eng)] == 0) begin
              bcode = ERR_TOKEN_DEADLOCK;
              baddr = 32'(ch_pop_next(eng));
            end else begin
              bad = 1'b0;
              if (pop_prev) tok_q[ch_pop_prev(eng)] <= tok_q[ch_pop_prev(eng)] - 8'd1;
              if (pop_next) tok_q[ch_pop_next(eng)] <= tok_q[ch_pop_next(eng)] - 8'd1;
            end
            if (perr_v_q) begin
              ds_q <= D_DRAIN;
            end else if (bad) begin
              if (!pv) begin
                pv = 1'b1;
                pcode = bcode;
                paddr = baddr;
                ppc = pc_q;
              end
              ds_q <= D_DRAIN;
            end else begin
              ds_q <= D_RANGE;
            end
          end

          D_RANGE: begin
            // Largest scratchpad index of each range the instruction touches, checked in field
            // order.
            logic [63:0] m0, m1, m2, m3;
            logic [63:0] lim0, lim1, lim2, lim3;
            logic [67:0] rng;
            m0 = '0; m1 = '0; m2 = '0; m3 = '0;
            lim0 = 64'd1; lim1 = 64'd1; lim2 = 64'd1; lim3 = 64'd1;
            // Wide rows (ISA 1.4) occupy two rows: a wide LOAD/STORE moves two rows per
            // (z, y, x), and a wide operand's range ends one row after its base row.
            unique case (op)
              OP_LOAD: begin
                logic [16:0] yn, xn;
                yn = 17'(dw[3][31:16]) + 17'(dw[4][27:24]) + 17'(dw[4][31:28]);
                xn = 17'(dw[3][15:0]) + 17'(dw[4][19:16]) + 17'(dw[4][23:20]);
                m0 = 64'(dw[2]) + (64'(dw[4][15:0]) * 64'(yn) * 64'(xn) << dw[0][18]) - 64'd1;
                lim0 = sp_rows(dw[0][17:16]);
              end
              OP_STORE: begin
                m0 = 64'(dw[2]) + (64'(dw[4][15:0]) * 64'(dw[3][31:16]) * 64'(dw[3][15:0]) <<
                                   dw[0][18]) - 64'd1;
                lim0 = sp_rows(dw[0][17:16]);
              end
              OP_GEMM: begin
                logic [63:0] o1, i1, r1;
                o1 = 64'(dw[3][15:0]) - 64'd1;
                i1 = 64'(dw[3][31:16]) - 64'd1;
                r1 = 64'(dw[2][31:16]) - 64'd1;
                m0 = 64'(dw[1][15:0]) + o1 * 64'(dw[4][15:0]) + i1 * 64'(dw[4][31:16]) +
                     r1 * 64'(dw[5][15:0]) + 64'(dw[0][17]);
                m1 = 64'(dw[1][31:16]) + o1 * 64'(dw[7][15:0]) + i1 * 64'(dw[7][31:16]);
                m2 = 64'(dw[2][15:0]) + o1 * 64'(dw[5][31:16]) + i1 * 64'(dw[6][15:0]) +
                     r1 * 64'(dw[6][31:16]);
                lim0 = 64'(ACT_ROWS);
                lim1 = 64'(WGT_TILES);
                lim2 = 64'(ACC_ROWS);
              end
              OP_VEC: begin
                // src (window included), aux, dst, then the parameter rows.
                logic [63:0] o1, r1, kw, kh, ext;
                logic [3:0]  md;
                md = dw[0][19:16];
                o1 = 64'(dw[3][15:0]) - 64'd1;
                r1 = 64'(dw[2][31:16]) - 64'd1;
                kw = vec_window(md) ? 64'(dw[7][7:0]) : 64'd1;
                kh = vec_window(md) ? 64'(dw[7][15:8]) : 64'd1;
                // A wide source's window elements are two rows apart (DWCONV) and every
                // source row is the first of a pair (wide_src: DWCONV, LUT).
                ext = o1 * 64'(dw[4][15:0]) + r1 * 64'(dw[4][31:16]) +
                      (kh - 64'd1) * 64'(dw[7][31:16]) + ((kw - 64'd1) << dw[0][22]);
                m0 = 64'(dw[1][15:0]) + ext + 64'(dw[0][22]);
                lim0 = (md == VEC_REQUANT[3:0]) ? 64'(ACC_ROWS) : 64'(ACT_ROWS);
                if (md == VEC_ADD[3:0] || md == VEC_MUL[3:0]) begin
                  m1 = 64'(dw[6][31:16]) + ext;
                  lim1 = 64'(ACT_ROWS);
                end else if (md == VEC_DWCONV[3:0]) begin
                  m1 = 64'(dw[6][31:16]) + kh * kw - 64'd1;
                  lim1 = 64'(WGT_ROWS);
                end
                m2 = 64'(dw[1][31:16]) + o1 * 64'(dw[5][15:0]) + r1 * 64'(dw[5][31:16]) +
                     64'(dw[0][23]);
                lim2 = 64'(ACT_ROWS);
                if (md == VEC_REQUANT[3:0] || md == VEC_DWCONV[3:0]) begin
                  m3 = 64'(dw[2][15:0]) + 64'd2;
                  lim3 = 64'(ACC_ROWS);
                end else if (md == VEC_LUT[3:0]) begin
                  m3 = 64'(dw[2][15:0]) + (dw[0][22] ? 64'(WLUT_ROWS) : 64'(LUT_ROWS)) - 64'd1;
                  lim3 = 64'(ACT_ROWS);
                end else if (md == VEC_SOFTMAX[3:0]) begin  // the int32 table in ACC
                  m3 = 64'(dw[2][15:0]) + 64'(LUT_ROWS) - 64'd1;
                  lim3 = 64'(ACC_ROWS);
                end else if (md != VEC_MAXPOOL[3:0]) begin
                  m3 = 64'(dw[2][15:0]);
                  lim3 = 64'(ACC_ROWS);
                end
              end
              default: ;
            endcase
            rng = dram_range(dw);
            d_lo_q <= rng[67:34];
            d_hi_q <= rng[33:0];
            if (perr_v_q) begin
              ds_q <= D_DRAIN;
            end else if (m0 >= lim0 || m1 >= lim1 || m2 >= lim2 || m3 >= lim3) begin
              if (!pv) begin
                pv = 1'b1;
                pcode = ERR_SP_RANGE;
                paddr = (m0 >= lim0) ? m0[31:0] : (m1 >= lim1) ? m1[31:0] :
                        (m2 >= lim2) ? m2[31:0] : m3[31:0];
                ppc = pc_q;
              end
              ds_q <= D_DRAIN;
            end else begin
              ds_q <= D_ISSUE;
            end
          end

          D_ISSUE: begin
            // Into the engine's queue when it has room. Pushes count in program order here;
            // one beyond MAX_TOKENS is the instruction's error, reported after it ran.
            logic [1:0] eng;
            eng = engine_of(dw[0][7:0], dw[0][17:16]);
            if (perr_v_q) begin
              ds_q <= D_DRAIN;
            end else if (!eq_v_q[eng][eq_tl_q[eng]]) begin
              eq_q[eng][eq_tl_q[eng]] <= '{w: {dw[7], dw[6], dw[5], dw[4], dw[3], dw[2], dw[1], dw[0]},
                                          pc: pc_q, lo: d_lo_q, hi: d_hi_q};
              eq_v_q[eng][eq_tl_q[eng]] <= 1'b1;
              eq_tl_q[eng] <= eq_tl_q[eng] + 1'b1;
              if (push_prev && tok_q[ch_push_prev(eng)] == 8'(MAX_TOKENS)) begin
                if (!pv) begin
                  pv = 1'b1;
                  pcode = ERR_TOKEN_DEADLOCK;
                  paddr = 32'(ch_push_prev(eng));
                  ppc = pc_q;
                end
                ds_q <= D_DRAIN;
              end else if (push_next && tok_q[ch_push_next(eng)] == 8'(MAX_TOKENS)) begin
                if (!pv) begin
                  pv = 1'b1;
                  pcode = ERR_TOKEN_DEADLOCK;
                  paddr = 32'(ch_push_next(eng));
                  ppc = pc_q;
                end
                ds_q <= D_DRAIN;
              end else begin
                if (push_prev) tok_q[ch_push_prev(eng)] <= tok_q[ch_push_prev(eng)] + 8'd1;
                if (push_next) tok_q[ch_push_next(eng)] <= tok_q[ch_push_next(eng)] + 8'd1;
                if (pc_q + 32'd32 == cb_len_q) begin
                  ds_q <= D_DRAIN;
                end else begin
                  pc_q <= pc_q + 32'd32;
                  ds_q <= D_FETCH;
                end
              end
            end
          end

          D_DRAIN: begin
            // Every dispatched instruction has finished (or was dropped after an error).
            if (eq_v_q[0] == 0 && eq_v_q[1] == 0 && eq_v_q[2] == 0 && ls_q == L_IDLE &&
                cs_q == C_IDLE && ss_q == T_IDLE && !ifu_busy) begin
              if (perr_v_q) begin
                err_code_q <= perr_code_q;
                err_addr_q <= perr_addr_q;
                err_queue_q <= q_q;
                err_instr_q <= perr_pc_q;
                irq_next[8] = 1'b1;
              end else begin
                cnt_q[CNT_JOBS] <= cnt_q[CNT_JOBS] + 64'd1;
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
              end
              ds_q <= D_IDLE;
            end
          end

          default: ds_q <= D_IDLE;
        endcase

        // ========================================================== LOAD engine
        unique case (ls_q)
          L_IDLE: begin
            if (h_drop[0]) begin
              pop_e[0] = 1'b1;
            end else if (h_go[0]) begin
              logic [31:0] w [8];
              for (int i = 0; i < 8; i++) w[i] = h_e[0].w[i*32 +: 32];
              pop_e[0] = 1'b1;
              if (w[0][9]) tav[ch_pop_next(2'd0)] = tav[ch_pop_next(2'd0)] - 9'd1;
              for (int i = 0; i < 8; i++) lw[i] <= w[i];
              l_pc_q <= h_e[0].pc;
              l_lo_q <= h_e[0].lo;
              l_hi_q <= h_e[0].hi;
              if (w[0][7:0] == OP_LOAD) begin
                l_z_q <= '0;
                l_y_q <= '0;
                l_x_q <= '0;
                l_yn_q <= 17'(w[3][31:16]) + 17'(w[4][27:24]) + 17'(w[4][31:28]);
                l_xn_q <= 17'(w[3][15:0]) + 17'(w[4][19:16]) + 17'(w[4][23:20]);
                l_row_q <= w[2];
                l_sp_q <= w[0][17:16];
                l_len_q <= dma_row_bytes(w[0][31:24], w[0][18:16]);
                l_done_q <= 1'b0;
                ldq_req_valid_q <= 1'b0;
                ls_q <= L_ROW;
              end else begin
                ls_q <= L_DONE;      // SYNC
              end
            end
          end

          // Rows are generated in (z, y, x) order at up to one per cycle: padding rows are
          // written here, DRAM rows go to npu_ldq and come back in order. Returned rows own
          // the scratchpad write port; padding waits a cycle when both want it.
        L_ROW: begin
          logic accepted;
          accepted = ldq_req_valid_q && ldq_req_ready;
          if (accepted) ldq_req_valid_q <= 1'b0;
          if (ldq_row_valid) begin
            unique case (l_sp_q)
              SP_ACT[1:0]: begin
                // A wide row (ISA 1.4) fills both of its rows (different banks) at once.
                act_mem[AAW'(ldq_row_idx)] <= ldq_row_data[N*8-1:0];
                act_tag[AAW'(ldq_row_idx)] <= epoch_q;
                if (lw[0][18]) begin
                  act_mem[AAW'(ldq_row_idx) + 1'b1] <= ldq_row_data[N*16-1:N*8];
                  act_tag[AAW'(ldq_row_idx) + 1'b1] <= epoch_q;
                end
              end
              SP_WGT[1:0]: begin
                wgt_mem[WAW'(ldq_row_idx)] <= ldq_row_data[N*8-1:0];
                wgt_tag[WAW'(ldq_row_idx)] <= epoch_q;
              end
              default: begin
                acc_mem[CAW'(ldq_row_idx)] <= ldq_row_data;
                acc_tag[CAW'(ldq_row_idx)] <= epoch_q;
              end
            endcase
            cnt_q[CNT_DMA_RD_BYTES] <= cnt_q[CNT_DMA_RD_BYTES] + 64'(ldq_row_len);
          end
          if (!l_done_q && (!ldq_req_valid_q || accepted) && !ldq_err) begin
            logic [16:0] y0, x0;
            logic pad, adv;
            y0 = 17'(l_y_q) - 17'(lw[4][27:24]);
            x0 = 17'(l_x_q) - 17'(lw[4][19:16]);
            pad = (17'(l_y_q) < 17'(lw[4][27:24])) || (y0 >= 17'(lw[3][31:16])) ||
                  (17'(l_x_q) < 17'(lw[4][19:16])) || (x0 >= 17'(lw[3][15:0]));
            adv = 1'b0;
            if (pad) begin
              if (!ldq_row_valid) begin
                unique case (l_sp_q)
                  SP_ACT[1:0]: begin
                    act_mem[AAW'(l_row_q)] <= '0;
                    act_tag[AAW'(l_row_q)] <= epoch_q;
                    if (lw[0][18]) begin
                      act_mem[AAW'(l_row_q) + 1'b1] <= '0;
                      act_tag[AAW'(l_row_q) + 1'b1] <= epoch_q;
                    end
                  end
                  SP_WGT[1:0]: begin wgt_mem[WAW'(l_row_q)] <= '0; wgt_tag[WAW'(l_row_q)] <= epoch_q; end
                  default: begin acc_mem[CAW'(l_row_q)] <= '0; acc_tag[CAW'(l_row_q)] <= epoch_q; end
                endcase
                adv = 1'b1;
              end
            end else begin
              ldq_req_valid_q <= 1'b1;
              ldq_req_va_q <= lw[1] + 32'(l_z_q) * lw[7] + 32'(y0[15:0]) * lw[6] +
                              32'(x0[15:0]) * lw[5];
              ldq_req_row_q <= l_row_q;
              adv = 1'b1;
            end
            if (adv) begin
              l_row_q <= l_row_q + (lw[0][18] ? 32'd2 : 32'd1);
              if (17'(l_x_q) + 1 == l_xn_q) begin
                l_x_q <= '0;
                if (17'(l_y_q) + 1 == l_yn_q) begin
                  l_y_q <= '0;
                  l_z_q <= l_z_q + 16'd1;
                  if (l_z_q + 16'd1 == lw[4][15:0]) l_done_q <= 1'b1;
                end else begin
                  l_y_q <= l_y_q + 16'd1;
                end
              end else begin
                l_x_q <= l_x_q + 16'd1;
              end
            end
          end
          // Finished once every row was handed over (a request accepted this cycle is not yet
          // visible in ldq_idle) and the queue drained.
          if (ldq_idle && (ldq_err || (l_done_q && !ldq_req_valid_q))) begin
            ldq_req_valid_q <= 1'b0;
            if (ldq_err) begin
              if (!pv || l_pc_q <= ppc) begin
                pv = 1'b1;
                pcode = ldq_err_code;
                paddr = ldq_err_addr;
                ppc = l_pc_q;
              end
              ls_q <= L_IDLE;
            end else begin
              ls_q <= L_DONE;
            end
          end
        end

          // ------------------------------------------------------------ STORE

          L_DONE: begin
            if (lw[0][11]) tav[ch_push_next(2'd0)] = tav[ch_push_next(2'd0)] + 9'd1;
            // The instruction that overflowed a token channel is not counted (1.4).
            if (!perr_v_q || l_pc_q < perr_pc_q) begin
              ndone = ndone + 2'd1;
              trace_valid_o[0] <= 1'b1;
            end
            trace_offset_o[31:0] <= l_pc_q;
            for (int i = 0; i < 8; i++) trace_instr_o[i*32 +: 32] <= lw[i];
            ls_q <= L_IDLE;
          end

          default: ls_q <= L_IDLE;
        endcase

        // ========================================================== STORE engine
        // One row per request to npu_stq, in (z, y, x) order. The scratchpad read address
        // runs one row ahead, so the row for the next request is always on the read port.
        unique case (ss_q)
          T_IDLE: begin
            if (h_drop[2]) begin
              pop_e[2] = 1'b1;
            end else if (h_go[2]) begin
              logic [31:0] w [8];
              for (int i = 0; i < 8; i++) w[i] = h_e[2].w[i*32 +: 32];
              pop_e[2] = 1'b1;
              if (w[0][8]) tav[ch_pop_prev(2'd2)] = tav[ch_pop_prev(2'd2)] - 9'd1;
              for (int i = 0; i < 8; i++) sw[i] <= w[i];
              s_pc_q <= h_e[2].pc;
              s_lo_q <= h_e[2].lo;
              s_hi_q <= h_e[2].hi;
              if (w[0][7:0] == OP_STORE) begin
                s_z_q <= '0;
                s_y_q <= '0;
                s_x_q <= '0;
                s_yn_q <= 17'(w[3][31:16]);
                s_xn_q <= 17'(w[3][15:0]);
                s_ra_q <= w[2];
                s_sp_q <= w[0][17:16];
                s_len_q <= dma_row_bytes(w[0][31:24], w[0][18:16]);
                s_wide_q <= w[0][18];
                s_done_q <= 1'b0;
                stq_req_valid_q <= 1'b0;
                ss_q <= T_RUN;
              end else begin
                ss_q <= T_DONE;      // SYNC
              end
            end
          end

          T_RUN: begin
            logic accepted;
            accepted = stq_req_valid_q && stq_req_ready;
            if (accepted) stq_req_valid_q <= 1'b0;
            if (stq_row_done)
              cnt_q[CNT_DMA_WR_BYTES] <= cnt_q[CNT_DMA_WR_BYTES] + 64'(stq_row_len);
            if (!s_done_q && (!stq_req_valid_q || accepted) && !stq_err) begin
              stq_req_data_q <= s_rd;
              stq_req_valid_q <= 1'b1;
              stq_req_va_q <= sw[1] + 32'(s_z_q) * sw[7] + 32'(s_y_q) * sw[6] + 32'(s_x_q) * sw[5];
              s_ra_q <= s_ra_q + (s_wide_q ? 32'd2 : 32'd1);
              if (17'(s_x_q) + 1 == s_xn_q) begin
                s_x_q <= '0;
                if (17'(s_y_q) + 1 == s_yn_q) begin
                  s_y_q <= '0;
                  s_z_q <= s_z_q + 16'd1;
                  if (s_z_q + 16'd1 == sw[4][15:0]) s_done_q <= 1'b1;
                end else begin
                  s_y_q <= s_y_q + 16'd1;
                end
              end else begin
                s_x_q <= s_x_q + 16'd1;
              end
            end
            if (stq_idle && (stq_err || (s_done_q && !stq_req_valid_q))) begin
              stq_req_valid_q <= 1'b0;
              if (stq_err) begin
                if (!pv || s_pc_q <= ppc) begin
                  pv = 1'b1;
                  pcode = stq_err_code;
                  paddr = stq_err_addr;
                  ppc = s_pc_q;
                end
                ss_q <= T_IDLE;
              end else begin
                ss_q <= T_DONE;
              end
            end
          end

          T_DONE: begin
            if (sw[0][10]) tav[ch_push_prev(2'd2)] = tav[ch_push_prev(2'd2)] + 9'd1;
            // The instruction that overflowed a token channel is not counted (1.4).
            if (!perr_v_q || s_pc_q < perr_pc_q) begin
              ndone = ndone + 2'd1;
              trace_valid_o[2] <= 1'b1;
            end
            trace_offset_o[95:64] <= s_pc_q;
            for (int i = 0; i < 8; i++) trace_instr_o[512 + i*32 +: 32] <= sw[i];
            ss_q <= T_IDLE;
          end

          default: ss_q <= T_IDLE;
        endcase

        // ========================================================== COMPUTE engine
        unique case (cs_q)
          C_IDLE: begin
            if (h_drop[1]) begin
              pop_e[1] = 1'b1;
            end else if (h_go[1]) begin
              logic [31:0] w [8];
              for (int i = 0; i < 8; i++) w[i] = h_e[1].w[i*32 +: 32];
              pop_e[1] = 1'b1;
              if (w[0][8]) tav[ch_pop_prev(2'd1)] = tav[ch_pop_prev(2'd1)] - 9'd1;
              if (w[0][9]) tav[ch_pop_next(2'd1)] = tav[ch_pop_next(2'd1)] - 9'd1;
              for (int i = 0; i < 8; i++) iw[i] <= w[i];
              c_pc_q <= h_e[1].pc;
              lz_q <= '0;
              ly_q <= '0;
              lx_q <= '0;
              unique case (w[0][7:0])
                OP_GEMM: cs_q <= G_BLK;
                OP_VEC: begin
                  acc_ra_q <= CAW'(w[2][15:0]);
                  act_ra_q <= AAW'(w[2][15:0]);
                  k_q <= '0;
                  cs_q <= V_SETUP;
                end
                default: cs_q <= C_DONE;   // NOP, SYNC
              endcase
            end
          end


          // ------------------------------------------------------------ GEMM
          // lz_q = o, ly_q = i, lx_q = r.
          // Weight double buffering: a loader fills wnext_q one WGT row per cycle while the
          // array streams the current block, so a block costs max(R, N) cycles after the first.
          G_BLK: begin
            wgt_ra_q <= WAW'(g_tile(lz_q, ly_q) * N);
            wl_run_q <= 1'b1;
            k_q <= '0;
            cs_q <= G_WLOAD;
          end

          G_WLOAD: begin
            // Waiting for the loader: swap as soon as the tile is complete.
            if (wl_full) begin
              g_swap = 1'b1;
              cs_q <= G_RUN;
            end
          end

          G_RUN: begin
            logic [N*32-1:0] p;
            // A wide operand (ISA 1.4) is the row pair at act_ra_q, read in the same cycle.
            p = mac_row(iw[0][17] ? act_rd16 : widen_row(act_rd), wtile_q);
            acc_mem[acc_ra_q] <= (iw[0][16] && ly_q == 0) ? p : add_rows(acc_rd, p);
            acc_tag[acc_ra_q] <= epoch_q;
            act_ra_q <= act_ra_q + AAW'(iw[5][15:0]);
            acc_ra_q <= acc_ra_q + CAW'(iw[6][31:16]);
            lx_q <= lx_q + 16'd1;
            if (lx_q + 16'd1 == iw[2][31:16]) begin
              if (!g_next_v) begin
                cs_q <= C_DONE;
                cnt_q[CNT_MACS] <= cnt_q[CNT_MACS] + 64'(iw[3][15:0]) * 64'(iw[3][31:16]) *
                                   64'(iw[2][31:16]) * 64'(N * N);
              end else begin
                lz_q <= g_next_o;
                ly_q <= g_next_i;
                if (wl_full) g_swap = 1'b1;
                else cs_q <= G_WLOAD;
              end
            end
          end

          // ------------------------------------------------------------ VEC
          // Setup: REQUANT/DWCONV read the bias, multiplier and shift rows P..P+2; ADD, MUL,
          // AVGPOOL read the scalars of row P; LUT reads its 256/N table rows. Then one source
          // element per cycle: REQUANT and LUT one row per output row, ADD/MUL rows a and b,
          // window modes kh*kw rows in groups of up to WIN (1.3). lz_q = o, lx_q = r.
          V_SETUP: begin
            logic [3:0] md;
            md = iw[0][19:16];
            k_q <= k_q + 16'd1;
            if (md == VEC_REQUANT[3:0] || md == VEC_DWCONV[3:0]) begin
              if (k_q == 16'd0) v_bias_q <= iw[0][20] ? acc_rd : '0;
              if (k_q == 16'd1) v_mul_q <= acc_rd;
              if (k_q == 16'd2) v_shift_q <= acc_rd;
              acc_ra_q <= acc_ra_q + 1'b1;
            end else if (md == VEC_LUT[3:0] && iw[0][22]) begin
              if (k_q < 16'(WLUT_PAIRS)) begin
                v_wtable_q <= {act_rd16, v_wtable_q[WLUT_BITS-1:2*N*8]};
                act_ra_q <= act_ra_q + AAW'(2);
              end
            end else if (md == VEC_LUT[3:0]) begin
              if (k_q < 16'(LUT_ROWS)) begin
                v_table_q <= {act_rd, v_table_q[2047:N*8]};
                act_ra_q <= act_ra_q + 1'b1;
              end
            end else if (md == VEC_SOFTMAX[3:0]) begin
              if (k_q < 16'(LUT_ROWS)) begin
                v_tbl32_q <= {acc_rd, v_tbl32_q[8191:N*32]};
                acc_ra_q <= acc_ra_q + 1'b1;
              end
              v_sm_ph_q <= 2'd0;
            end else if (k_q == 16'd0) begin
              v_par_q <= acc_rd[159:0];
            end
            if (k_q + 16'd1 == vec_setup(md, iw[0][22])) begin
              // First element of the first row.
              v_so_q <= 32'(iw[1][15:0]);
              v_base_q <= 32'(iw[1][15:0]);
              v_line_q <= 32'(iw[1][15:0]);
              v_ao_q <= 32'(iw[6][31:16]);
              v_ab_q <= 32'(iw[6][31:16]);
              v_dst_o_q <= AAW'(iw[1][31:16]);
              v_dst_q <= AAW'(iw[1][31:16]);
              v_ky_q <= '0;
              v_kx_q <= '0;
              v_ph_q <= 1'b0;
              if (md == VEC_REQUANT[3:0]) acc_ra_q <= CAW'(iw[1][15:0]);
              else act_ra_q <= AAW'(iw[1][15:0]);
              wgt_ra_q <= WAW'(iw[6][31:16]);
              cs_q <= V_RUN;
            end
          end

          V_RUN: begin
            logic [3:0]      md;
            logic            row_done;
            logic [N*16-1:0] outrow;         // destination bytes (two rows with wide_dst)
            md = iw[0][19:16];
            row_done = 1'b0;
            outrow = '0;
            unique case (md)
              VEC_REQUANT[3:0]: begin
                outrow = requant_row(acc_rd, v_bias_q, v_mul_q, v_shift_q, iw[3][23:16],
                                     iw[0][21], iw[0][23], iw[6][7:0], iw[6][15:8]);
                row_done = 1'b1;
              end
              VEC_LUT[3:0]: begin
                if (iw[0][22])
                  outrow = lut_wide_row(act_rd16, v_wtable_q, iw[0][23], iw[6][7:0], iw[6][15:8]);
                else
                  outrow[N*8-1:0] = lut_row(act_rd, v_table_q, iw[6][7:0], iw[6][15:8]);
                row_done = 1'b1;
              end
              VEC_ADD[3:0], VEC_MUL[3:0]: begin
                if (!v_ph_q) begin
                  v_a_q <= act_rd;
                  act_ra_q <= AAW'(v_ab_q);
                  v_ph_q <= 1'b1;
                end else begin
                  outrow[N*8-1:0] = addmul_row(md == VEC_MUL[3:0], v_a_q, act_rd, v_par_q,
                                               iw[3][23:16], iw[0][21], iw[6][7:0], iw[6][15:8]);
                  v_ph_q <= 1'b0;
                  row_done = 1'b1;
                end
              end
              VEC_SOFTMAX[3:0]: begin
                // Three passes over the segment's R rows (max, sum, output), the division
                // between the second and the third; one row or one quotient bit per cycle.
                logic [7:0]  lanes;
                logic        last;
                logic [31:0] nb;
                lanes = (lx_q + 16'd1 == iw[2][31:16] && iw[7][15:8] != 0) ? iw[7][15:8] : 8'(N);
                last = lx_q + 16'd1 == iw[2][31:16];
                nb = last ? v_so_q : v_base_q + 32'(iw[4][31:16]);
                unique case (v_sm_ph_q)
                  2'd0: v_max_q <= sm_row_max(act_rd, lanes, (lx_q == 0) ? -8'sd128 : v_max_q);
                  2'd1: v_sum_q <= ((lx_q == 0) ? 64'sd0 : v_sum_q) + sm_row_sum(act_rd, v_tbl32_q, v_max_q, lanes);
                  2'd2: begin
                    logic [63:0] r2;
                    r2 = {v_rem_q[62:0], v_div_q == 6'd0};
                    if (v_sum_q > 0 && r2 >= 64'(v_sum_q)) begin
                      v_rem_q <= 63'(r2 - 64'(v_sum_q));
                      v_quo_q <= {v_quo_q[62:0], 1'b1};
                    end else begin
                      v_rem_q <= r2[62:0];
                      v_quo_q <= {v_quo_q[62:0], 1'b0};
                    end
                    v_div_q <= v_div_q + 6'd1;
                    if (v_div_q == 6'd62) v_sm_ph_q <= 2'd3;
                  end
                  default: begin
                    act_mem[v_dst_q] <= sm_row_out(act_rd, v_tbl32_q, v_max_q, v_quo_q, lanes,
                                                   iw[7][5:0], iw[3][23:16], iw[6][7:0], iw[6][15:8]);
                    act_tag[v_dst_q] <= epoch_q;
                    v_dst_q <= v_dst_q + AAW'(iw[5][31:16]);
                  end
                endcase
                if (v_sm_ph_q != 2'd2) begin
                  v_base_q <= nb;
                  act_ra_q <= AAW'(nb);
                  lx_q <= last ? 16'd0 : lx_q + 16'd1;
                  if (last && v_sm_ph_q == 2'd1) begin
                    v_rem_q <= '0;
                    v_quo_q <= '0;
                    v_div_q <= '0;
                  end
                  if (last) v_sm_ph_q <= v_sm_ph_q + 2'd1;
                  if (last && v_sm_ph_q == 2'd3) begin
                    // Next segment.
                    logic [31:0]    so;
                    logic [AAW-1:0] nd;
                    so = v_so_q + 32'(iw[4][15:0]);
                    nd = v_dst_o_q + AAW'(iw[5][15:0]);
                    v_so_q <= so;
                    v_base_q <= so;
                    act_ra_q <= AAW'(so);
                    v_dst_o_q <= nd;
                    v_dst_q <= nd;
                    lz_q <= lz_q + 16'd1;
                    if (lz_q + 16'd1 == iw[3][15:0]) cs_q <= C_DONE;
                  end
                end
              end
              default: begin
                // One group of up to WIN elements of window row ky per cycle (ISA 1.3):
                // kh * ceil(kw / WIN) cycles per output row. A wide source (DWCONV, ISA 1.4)
                // reads WIN16 = WIN elements in 2·WIN rows: the same kh * ceil(kw / WIN).
                logic [N*32-1:0] acc;
                logic [15:0]     rest, cnt, grp;
                logic            row_end;
                grp = iw[0][22] ? 16'(WIN16) : 16'(WIN);
                rest = 16'(iw[7][7:0]) - 16'(v_kx_q);
                cnt = (rest > grp) ? grp : rest;
                row_end = rest <= grp;
                acc = window_group(md, v_ky_q == 0 && v_kx_q == 0, v_accum_q, act_ra_q, wgt_ra_q,
                                   cnt, iw[0][22]);
                if (v_ky_q + 8'd1 == iw[7][15:8] && row_end) begin
                  if (md == VEC_DWCONV[3:0])
                    outrow = requant_row(acc, v_bias_q, v_mul_q, v_shift_q, iw[3][23:16],
                                         1'b0, iw[0][23], iw[6][7:0], iw[6][15:8]);
                  else
                    outrow[N*8-1:0] = pool_row(md, acc, v_par_q,
                                               16'(iw[7][15:8]) * 16'(iw[7][7:0]),
                                               iw[3][23:16], iw[6][7:0], iw[6][15:8]);
                  row_done = 1'b1;
                end else begin
                  v_accum_q <= acc;
                  wgt_ra_q <= wgt_ra_q + WAW'(cnt);
                  if (row_end) begin
                    v_kx_q <= '0;
                    v_ky_q <= v_ky_q + 8'd1;
                    v_line_q <= v_line_q + 32'(iw[7][31:16]);
                    act_ra_q <= AAW'(v_line_q + 32'(iw[7][31:16]));
                  end else begin
                    v_kx_q <= v_kx_q + 8'(grp);
                    act_ra_q <= act_ra_q + (iw[0][22] ? AAW'(2 * WIN16) : AAW'(WIN));
                  end
                end
              end
            endcase
            if (row_done) begin
              logic [31:0]    nb, na;
              logic [AAW-1:0] nd;
              act_mem[v_dst_q] <= outrow[N*8-1:0];
              act_tag[v_dst_q] <= epoch_q;
              if (iw[0][23]) begin  // wide_dst (ISA 1.4): the second row of the pair
                act_mem[v_dst_q + 1'b1] <= outrow[N*16-1:N*8];
                act_tag[v_dst_q + 1'b1] <= epoch_q;
              end
              if (lx_q + 16'd1 == iw[2][31:16]) begin
                nb = v_so_q + 32'(iw[4][15:0]);
                na = v_ao_q + 32'(iw[4][15:0]);
                nd = v_dst_o_q + AAW'(iw[5][15:0]);
                v_so_q <= nb;
                v_ao_q <= na;
                v_dst_o_q <= nd;
                lx_q <= '0;
                lz_q <= lz_q + 16'd1;
                if (lz_q + 16'd1 == iw[3][15:0]) cs_q <= C_DONE;
              end else begin
                nb = v_base_q + 32'(iw[4][31:16]);
                na = v_ab_q + 32'(iw[4][31:16]);
                nd = v_dst_q + AAW'(iw[5][31:16]);
                lx_q <= lx_q + 16'd1;
              end
              v_base_q <= nb;
              v_line_q <= nb;
              v_ab_q <= na;
              v_dst_q <= nd;
              v_ky_q <= '0;
              v_kx_q <= '0;
              if (md == VEC_REQUANT[3:0]) acc_ra_q <= CAW'(nb);
              else act_ra_q <= AAW'(nb);
              wgt_ra_q <= WAW'(iw[6][31:16]);
            end
          end


          C_DONE: begin
            if (iw[0][10]) tav[ch_push_prev(2'd1)] = tav[ch_push_prev(2'd1)] + 9'd1;
            if (iw[0][11]) tav[ch_push_next(2'd1)] = tav[ch_push_next(2'd1)] + 9'd1;
            // The instruction that overflowed a token channel is not counted (1.4).
            if (!perr_v_q || c_pc_q < perr_pc_q) begin
              ndone = ndone + 2'd1;
              trace_valid_o[1] <= 1'b1;
            end
            trace_offset_o[63:32] <= c_pc_q;
            for (int i = 0; i < 8; i++) trace_instr_o[256 + i*32 +: 32] <= iw[i];
            cs_q <= C_IDLE;
          end

          default: cs_q <= C_IDLE;
        endcase

        if (g_swap) begin
          logic [15:0] so, si;
          so = (cs_q == G_RUN) ? g_next_o : lz_q;
          si = (cs_q == G_RUN) ? g_next_i : ly_q;
          wtile_q <= wl_run_q ? {wgt_rd, wnext_q[N*N*8-1:N*8]} : wnext_q;
          act_ra_q <= AAW'(32'(iw[1][15:0]) + 32'(so) * 32'(iw[4][15:0]) +
                           32'(si) * 32'(iw[4][31:16]));
          acc_ra_q <= CAW'(32'(iw[2][15:0]) + 32'(so) * 32'(iw[5][31:16]) +
                           32'(si) * 32'(iw[6][15:0]));
          lx_q <= '0;
          if (si + 16'd1 < iw[3][31:16]) begin
            wgt_ra_q <= WAW'(g_tile(so, si + 16'd1) * N);
            wl_run_q <= 1'b1;
            k_q <= '0;
          end else if (so + 16'd1 < iw[3][15:0]) begin
            wgt_ra_q <= WAW'(g_tile(so + 16'd1, 16'd0) * N);
            wl_run_q <= 1'b1;
            k_q <= '0;
          end
        end


        // Engine queue heads consumed on this edge (the dispatcher only fills free slots).
        for (int e = 0; e < 3; e++) begin
          if (pop_e[e]) begin
            eq_v_q[e][eq_hd_q[e]] <= 1'b0;
            eq_hd_q[e] <= eq_hd_q[e] + 1'b1;
          end
        end
        for (int t = 0; t < 4; t++) tok_av_q[t] <= tav[t];
        perr_v_q <= pv;
        perr_code_q <= pcode;
        perr_addr_q <= paddr;
        perr_pc_q <= ppc;
        if (ndone != 0) cnt_q[CNT_INSTRS] <= cnt_q[CNT_INSTRS] + 64'(ndone);
        trace_queue_o <= 8'(q_q);

        if (raise) begin
          // Ring-level error: no job is running.
          err_code_q <= r_code;
          err_addr_q <= r_addr;
          err_queue_q <= r_queue;
          err_instr_q <= 32'hFFFF_FFFF;
          irq_next[8] = 1'b1;
          ds_q <= D_IDLE;
        end
      end  // !hold_i
      irq_status_q <= irq_next;
    end
  end
endmodule
