// npu_top: the NPU (docs/architecture.md section 1).
//
// Register bus (combinational read, write on the clock edge), one memory master port shared by
// three units, an interrupt line and an instruction-trace port. Offsets, opcodes, sizes and
// error codes all come from the generated package npu_config_pkg.
//
//   npu_ifu  ring entries and instruction fetch (block buffer of 8 instructions)
//   npu_ldq  LOAD's pipelined reads (up to 128 bursts in flight, rows return in order)
//   npu_stq  STORE's posted writes
//   here     command processor, dispatcher (token rule, checks), GEMM array, VEC unit,
//            scratchpads, registers, counters
//
// Execution: the command processor picks the lowest-numbered ring with HEAD != TAIL, reads the
// entry and, for an EXEC, fetches and executes the command buffer one instruction at a time in
// program order. The token rule makes program order the architectural result, so tokens are
// only counted and checked here (pops before, pushes after each instruction). Within an
// instruction the units pipeline (rows stream through LOAD/STORE, GEMM overlaps the next weight
// tile with the current rows); faults stay precise (architecture.md 1.4). Cycle costs are in
// TIMING.md.
//
// Scratchpads are arrays of rows read through registered addresses (synchronous-read SRAM
// behaviour). A reset "clears" them in one cycle by bumping an epoch: a row whose tag differs
// from the current epoch reads as zero.
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

  output logic                              trace_valid_o,
  output logic [7:0]                        trace_queue_o,
  output logic [31:0]                       trace_offset_o,
  output logic [255:0]                      trace_instr_o
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
  logic [AAW-1:0]  act_ra_q;
  logic [WAW-1:0]  wgt_ra_q;
  logic [CAW-1:0]  acc_ra_q;
  logic [N*8-1:0]  act_rd;
  logic [N*8-1:0]  wgt_rd;
  logic [N*32-1:0] acc_rd;
  assign act_rd = (act_tag[act_ra_q] == epoch_q) ? act_mem[act_ra_q] : '0;
  assign wgt_rd = (wgt_tag[wgt_ra_q] == epoch_q) ? wgt_mem[wgt_ra_q] : '0;
  assign acc_rd = (acc_tag[acc_ra_q] == epoch_q) ? acc_mem[acc_ra_q] : '0;

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
  // Controller state
  // ------------------------------------------------------------------------------------------
  typedef enum logic [5:0] {
    S_IDLE, S_RING_WAIT, S_RING_DEC, S_FETCH, S_FETCH_WAIT, S_DECODE, S_RANGE,
    S_LD_ROW, S_ST_RUN,
    S_G_BLK, S_G_WLOAD, S_G_RUN,
    S_V_SETUP, S_V_RUN,
    S_COMPLETE
  } state_e;
  state_e st_q;

  logic [QW-1:0] q_q;            // queue being served
  logic          in_job_q;
  logic [31:0]   cb_va_q, cb_len_q, pt_base_q, pc_q;
  logic [31:0]   entry_pa_q;
  logic [31:0]   iw [8];         // current instruction words
  logic [7:0]    tok_q [4];      // token channels: 0 L->C, 1 C->L, 2 C->S, 3 S->C

  // Engine loop registers (shared by the engines; only one instruction runs at a time).
  logic [15:0] lz_q, ly_q, lx_q;     // LOAD/STORE (padded) loop indices, GEMM o/i/r, VEC o/r
  logic [16:0] ly_n, lx_n;           // LOAD padded extents
  logic [31:0] row_q;                // scratchpad row of the LOAD/STORE
  logic        ld_done_q;            // LOAD: every row has been generated
  logic        st_done_q;            // STORE: every row has been handed to npu_stq
  logic [7:0]  len_q;                // bytes per DRAM row
  logic [1:0]  sp_q;
  logic [N*N*8-1:0] wtile_q;         // weight tile held in the array, row k at bits k*N*8
  logic [N*N*8-1:0] wnext_q;         // tile being loaded for the next block
  logic           wl_run_q;          // weight loader active
  logic [15:0]    k_q;               // rows the loader has delivered
  logic [N*32-1:0] v_bias_q, v_mul_q, v_shift_q;   // REQUANT / DWCONV per-lane parameters
  logic [159:0]    v_par_q;          // scalars of ACC row P (lanes 0..4) for the other modes
  logic [2047:0]   v_table_q;        // LUT table, entry e at bits 8e+7:8e
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

  // Soft reset: a CONTROL write with the RESET bit takes effect on this edge.
  logic soft_rst;
  assign soft_rst = reg_valid_i && reg_write_i && reg_addr_i == REG_CONTROL &&
                    (reg_wdata_i & CONTROL_RESET) != 0;

  npu_ifu #(.BEAT_BYTES(BEAT_BYTES)) u_ifu (
    .clk_i, .rst_ni, .hold_i, .clear_i(soft_rst), .flush_i(tlb_flush_q || stq_pt_write),
    .inval_i(stq_wr), .inval_pa_i(stq_wr_pa), .inval_len_i(stq_wr_len),
    .pt_base_i(pt_base_q), .dram_bytes_i,
    .start_i(ifu_start_q), .phys_i(ifu_phys_q), .addr_i(ifu_addr_q), .limit_i(cb_len_q - pc_q),
    .busy_o(ifu_busy), .done_o(ifu_done), .err_o(ifu_err), .err_code_o(ifu_err_code),
    .err_addr_o(ifu_err_addr), .data_o(ifu_data), .stall_o(ifu_stall),
    .mem_req_valid_o(ifu_req_valid), .mem_req_ready_i, .mem_req_addr_o(ifu_req_addr),
    .mem_req_beats_o(ifu_req_beats), .mem_rsp_valid_i, .mem_rsp_data_i
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
    .req_len_i(len_q), .req_row_i(ldq_req_row_q),
    .row_valid_o(ldq_row_valid), .row_data_o(ldq_row_data), .row_idx_o(ldq_row_idx),
    .row_len_o(ldq_row_len), .idle_o(ldq_idle), .err_o(ldq_err), .err_code_o(ldq_err_code),
    .err_addr_o(ldq_err_addr), .stall_o(ldq_stall),
    .mem_req_valid_o(ldq_mem_valid), .mem_req_ready_i, .mem_req_addr_o(ldq_mem_addr),
    .mem_req_beats_o(ldq_mem_beats), .mem_rsp_valid_i, .mem_rsp_data_i
  );

  // STORE's write path.
  logic          stq_req_valid_q, stq_req_ready;
  logic [31:0]   stq_req_va_q;
  logic [RB-1:0] stq_req_data_q;
  logic          stq_row_done, stq_idle, stq_err, stq_pt_write, stq_stall;
  logic [7:0]    stq_row_len, stq_err_code;
  logic [31:0]   stq_err_addr;
  logic          stq_mem_valid, stq_mem_write, stq_wr;
  logic [31:0]   stq_wr_pa;
  logic [8:0]    stq_wr_len;
  logic [31:0]   stq_mem_addr;
  npu_stq #(.ROW_BYTES(ROW_BYTES), .BEAT_BYTES(BEAT_BYTES)) u_stq (
    .clk_i, .rst_ni, .hold_i, .clear_i(soft_rst), .tlb_flush_i(tlb_flush_q),
    .pt_base_i(pt_base_q), .dram_bytes_i,
    .req_valid_i(stq_req_valid_q), .req_ready_o(stq_req_ready), .req_va_i(stq_req_va_q),
    .req_len_i(len_q), .req_data_i(stq_req_data_q),
    .row_done_o(stq_row_done), .row_len_o(stq_row_len), .idle_o(stq_idle), .err_o(stq_err),
    .err_code_o(stq_err_code), .err_addr_o(stq_err_addr), .pt_write_o(stq_pt_write),
    .wr_o(stq_wr), .wr_pa_o(stq_wr_pa), .wr_len_o(stq_wr_len),
    .stall_o(stq_stall),
    .mem_req_valid_o(stq_mem_valid), .mem_req_ready_i, .mem_req_write_o(stq_mem_write),
    .mem_req_addr_o(stq_mem_addr), .mem_req_wdata_o, .mem_req_wstrb_o, .mem_rsp_valid_i,
    .mem_rsp_data_i
  );

  // One memory port: npu_ifu, npu_ldq and npu_stq never have requests in flight at the same
  // time (the controller runs one instruction at a time and LOAD/STORE drain their queues
  // before completing).
  assign mem_req_valid_o = ifu_req_valid || ldq_mem_valid || stq_mem_valid;
  assign mem_req_write_o = stq_mem_valid && stq_mem_write;
  assign mem_req_addr_o = stq_mem_valid ? stq_mem_addr :
                          ldq_mem_valid ? ldq_mem_addr : ifu_req_addr;
  assign mem_req_beats_o = stq_mem_valid ? 8'd1 : ldq_mem_valid ? ldq_mem_beats : ifu_req_beats;

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
  assign busy_o = (st_q != S_IDLE) || (enable_q && !halted && pending);
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
  logic [7:0] op;
  logic pop_prev, pop_next, push_prev, push_next;
  assign op = iw[0][7:0];
  assign pop_prev = iw[0][8];
  assign pop_next = iw[0][9];
  assign push_prev = iw[0][10];
  assign push_next = iw[0][11];

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
        bad |= (w[0][17:16] == 2'd3) || (w[0][23:18] != 0) || (32'(w[0][31:24]) > N);
        bad |= (w[3][15:0] == 0) || (w[3][31:16] == 0) || (w[4][15:0] == 0);
        if (w[0][7:0] == OP_STORE) bad |= (w[4][31:16] != 0);
      end
      OP_GEMM: bad |= (w[0][31:17] != 0) || (w[2][31:16] == 0) || (w[3][15:0] == 0) ||
                      (w[3][31:16] == 0);
      OP_VEC: begin
        // Fields a mode does not use must be zero; window modes need kw, kh >= 1.
        logic [3:0] md;
        md = w[0][19:16];
        bad |= (w[0][31:21] != 0) || (w[3][31:24] != 0) || (w[2][31:16] == 0) ||
               (w[3][15:0] == 0) || (md > VEC_DWCONV[3:0]);
        bad |= vec_window(md) ? (w[7][7:0] == 0 || w[7][15:8] == 0) : (w[7] != 0);
        unique case (md)
          VEC_REQUANT[3:0]: bad |= (w[6][31:16] != 0);
          VEC_LUT[3:0]:     bad |= (w[6][31:16] != 0) || w[0][20];
          VEC_ADD[3:0], VEC_MUL[3:0]: bad |= w[0][20];
          VEC_MAXPOOL[3:0]: bad |= (w[6][31:16] != 0) || w[0][20] || (w[2][15:0] != 0);
          VEC_AVGPOOL[3:0]: bad |= (w[6][31:16] != 0) || w[0][20];
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

  // Setup cycles of a VEC mode before its first row (parameter / table reads).
  function automatic logic [15:0] vec_setup(input logic [3:0] md);
    if (md == VEC_LUT[3:0]) return 16'(1 + LUT_ROWS);
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

  // ADD / MUL with the scalars of ACC row P: lane 0 m0, 1 m1, 2 s, 3 za, 4 zb.
  function automatic logic [N*8-1:0] addmul_row(input logic mul, input logic [N*8-1:0] a,
                                                input logic [N*8-1:0] b, input logic [159:0] par,
                                                input logic [7:0] zp, input logic [7:0] lo,
                                                input logic [7:0] hi);
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
      out[n*8 +: 8] = vec_clamp(vec_rq(t, par[69:64]) + 64'($signed(zp)), lo, hi);
    end
    return out;
  endfunction

  // One window element into the per-lane accumulators (MAXPOOL max, AVGPOOL sum, DWCONV sum of
  // products; all fit int32).
  function automatic logic [N*32-1:0] window_step(input logic [3:0] md, input logic first,
                                                  input logic [N*32-1:0] acc,
                                                  input logic [N*8-1:0] x,
                                                  input logic [N*8-1:0] w);
    logic [N*32-1:0] out;
    for (int n = 0; n < N; n++) begin
      logic signed [31:0] xv, av;
      xv = 32'($signed(x[n*8 +: 8]));
      av = $signed(acc[n*32 +: 32]);
      if (md == VEC_MAXPOOL[3:0]) out[n*32 +: 32] = (first || xv > av) ? xv : av;
      else if (md == VEC_AVGPOOL[3:0]) out[n*32 +: 32] = (first ? 32'sd0 : av) + xv;
      else out[n*32 +: 32] = (first ? 32'sd0 : av) + xv * 32'($signed(w[n*8 +: 8]));
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

  // p[n] = sum_k a[k] * W[k][n], int8 x int8 -> int32.
  function automatic logic [N*32-1:0] mac_row(input logic [N*8-1:0] a,
                                              input logic [N*N*8-1:0] w);
    logic [N*32-1:0] p;
    // k outer, columns inner: the generated C++ updates consecutive words (vectorisable).
    p = '0;
    for (int k = 0; k < N; k++) begin
      logic [31:0] ak;
      ak = 32'($signed(a[k*8 +: 8]));
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

  // VEC REQUANT of one row (round half toward +inf, then zero point and clamp).
  function automatic logic [N*8-1:0] requant_row(
      input logic [N*32-1:0] src, input logic [N*32-1:0] bias, input logic [N*32-1:0] mul,
      input logic [N*32-1:0] shift, input logic [7:0] zp, input logic [7:0] lo,
      input logic [7:0] hi);
    logic [N*8-1:0] out;
    for (int n = 0; n < N; n++) begin
      logic signed [31:0] v;
      logic signed [63:0] t;
      logic [5:0] s;
      v = $signed(src[n*32 +: 32] + bias[n*32 +: 32]);
      s = shift[n*32 +: 6];
      t = 64'(v) * 64'($signed(mul[n*32 +: 32]));
      if (s != 0) t = (t + (64'sd1 <<< (s - 6'd1))) >>> s;
      t = t + 64'($signed(zp));
      // Low bound first: low > high yields low (architecture.md 1.4).
      if (t < 64'($signed(lo))) t = 64'($signed(lo));
      else if (t > 64'($signed(hi))) t = 64'($signed(hi));
      out[n*8 +: 8] = t[7:0];
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
  // Controller
  // ------------------------------------------------------------------------------------------
  always_ff @(posedge clk_i) begin
    if (!rst_ni || soft_rst) begin
      // Power-on values. A soft reset also counts itself and clears the scratchpads.
      reset_count_q <= !rst_ni ? 32'd0 : reset_count_q + 32'd1;
      epoch_q <= !rst_ni ? 32'd1 : epoch_q + 32'd1;
      st_q <= S_IDLE;
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
      for (int t = 0; t < 4; t++) tok_q[t] <= '0;
      ifu_start_q <= 1'b0;
      tlb_flush_q <= 1'b0;
      trace_valid_o <= 1'b0;
      in_job_q <= 1'b0;
      wl_run_q <= 1'b0;
      ldq_req_valid_q <= 1'b0;
      stq_req_valid_q <= 1'b0;
    end else begin
      logic [8:0] irq_next;
      logic       raise;
      logic [7:0] r_code;
      logic [31:0] r_addr;
      logic [QW-1:0] r_queue;
      logic       g_swap;

      raise = 1'b0;
      r_code = ERR_NONE;
      r_addr = '0;
      r_queue = q_q;
      g_swap = 1'b0;
      irq_next = irq_status_q;

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
        trace_valid_o <= 1'b0;

        // GEMM weight loader: one WGT row per cycle into wnext_q while wl_run_q.
        if (wl_run_q) begin
          wnext_q <= {wgt_rd, wnext_q[N*N*8-1:N*8]};
          wgt_ra_q <= wgt_ra_q + 1'b1;
          k_q <= k_q + 16'd1;
          if (wl_full) wl_run_q <= 1'b0;
        end
  
        // Counters that depend only on the controller state.
        cnt_q[CNT_CYCLES] <= cnt_q[CNT_CYCLES] + 64'd1;
        if (st_q == S_LD_ROW ||
            (st_q inside {S_DECODE, S_RANGE, S_COMPLETE} && engine_of(iw[0][7:0], iw[0][17:16]) == 2'd0))
          cnt_q[CNT_BUSY_LOAD] <= cnt_q[CNT_BUSY_LOAD] + 64'd1;
        if (st_q inside {S_G_BLK, S_G_WLOAD, S_G_RUN, S_V_SETUP, S_V_RUN} ||
            (st_q inside {S_DECODE, S_RANGE, S_COMPLETE} && engine_of(iw[0][7:0], iw[0][17:16]) == 2'd1))
          cnt_q[CNT_BUSY_COMPUTE] <= cnt_q[CNT_BUSY_COMPUTE] + 64'd1;
        if (st_q == S_ST_RUN ||
            (st_q inside {S_DECODE, S_RANGE, S_COMPLETE} && engine_of(iw[0][7:0], iw[0][17:16]) == 2'd2))
          cnt_q[CNT_BUSY_STORE] <= cnt_q[CNT_BUSY_STORE] + 64'd1;
        if (ifu_stall || stq_stall || (st_q == S_LD_ROW && ldq_stall && !ldq_row_valid))
          cnt_q[CNT_STALL_MEM] <= cnt_q[CNT_STALL_MEM] + 64'd1;

        unique case (st_q)
          // ------------------------------------------------------------ command processor
          S_IDLE: begin
            if (enable_q && !halted && pending && !ifu_busy) begin
              logic [32:0] pa;
              logic [31:0] size;
              q_q <= pick;
              in_job_q <= 1'b0;
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
                st_q <= S_RING_WAIT;
              end
            end
          end

          S_RING_WAIT: begin
            if (ifu_done) begin
              if (ifu_err) begin
                raise = 1'b1;
                r_code = ifu_err_code;
                r_addr = ifu_err_addr;
              end else begin
                for (int i = 0; i < 8; i++) iw[i] <= ifu_data[i*32 +: 32];
                st_q <= S_RING_DEC;
              end
            end
          end

          S_RING_DEC: begin
            // iw holds the ring entry here.
            unique case (iw[0][7:0])
              RING_OP_NOP: begin
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
                st_q <= S_IDLE;
              end
              RING_OP_FENCE: begin
                comp_seq_q[q_q] <= iw[1];
                irq_next = irq_next | (9'd1 << q_q);
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
                st_q <= S_IDLE;
              end
              RING_OP_EXEC: begin
                if (iw[1][4:0] != 0 || iw[2][4:0] != 0 || iw[2] == 0 || iw[3][1:0] != 0) begin
                  raise = 1'b1;
                  r_code = ERR_BAD_RING_ENTRY;
                  r_addr = entry_pa_q;
                end else begin
                  cb_va_q <= iw[1];
                  cb_len_q <= iw[2];
                  pt_base_q <= iw[3];
                  pc_q <= '0;
                  in_job_q <= 1'b1;
                  for (int t = 0; t < 4; t++) tok_q[t] <= '0;
                  tlb_flush_q <= 1'b1;
                  st_q <= S_FETCH;
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
          S_FETCH: begin
            ifu_start_q <= 1'b1;
            ifu_phys_q <= 1'b0;
            ifu_addr_q <= cb_va_q + pc_q;
            st_q <= S_FETCH_WAIT;
          end

          S_FETCH_WAIT: begin
            if (ifu_done) begin
              if (ifu_err) begin
                raise = 1'b1;
                r_code = ifu_err_code;
                r_addr = ifu_err_addr;
              end else begin
                for (int i = 0; i < 8; i++) iw[i] <= ifu_data[i*32 +: 32];
                st_q <= S_DECODE;
              end
            end
          end

          S_DECODE: begin
            logic [1:0] eng;
            eng = engine_of(iw[0][7:0], iw[0][17:16]);
            if (illegal_instr(iw)) begin
              raise = 1'b1;
              r_code = ERR_ILLEGAL_INSTRUCTION;
              r_addr = cb_va_q + pc_q;
            end else if (pop_prev && tok_q[ch_pop_prev(eng)] == 0) begin
              raise = 1'b1;
              r_code = ERR_TOKEN_DEADLOCK;
              r_addr = 32'(ch_pop_prev(eng));
            end else if (pop_next && tok_q[ch_pop_next(eng)] == 0) begin
              raise = 1'b1;
              r_code = ERR_TOKEN_DEADLOCK;
              r_addr = 32'(ch_pop_next(eng));
            end else begin
              if (pop_prev) tok_q[ch_pop_prev(eng)] <= tok_q[ch_pop_prev(eng)] - 8'd1;
              if (pop_next) tok_q[ch_pop_next(eng)] <= tok_q[ch_pop_next(eng)] - 8'd1;
              st_q <= S_RANGE;
            end
          end

          S_RANGE: begin
            // Largest scratchpad index of each range the instruction touches, checked in field
            // order; then the engine's loop registers are set up.
            logic [63:0] m0, m1, m2, m3;
            logic [63:0] lim0, lim1, lim2, lim3;
            m0 = '0; m1 = '0; m2 = '0; m3 = '0;
            lim0 = 64'd1; lim1 = 64'd1; lim2 = 64'd1; lim3 = 64'd1;
            lz_q <= '0;
            ly_q <= '0;
            lx_q <= '0;
            unique case (op)
              OP_LOAD: begin
                logic [16:0] yn, xn;
                yn = 17'(iw[3][31:16]) + 17'(iw[4][27:24]) + 17'(iw[4][31:28]);
                xn = 17'(iw[3][15:0]) + 17'(iw[4][19:16]) + 17'(iw[4][23:20]);
                m0 = 64'(iw[2]) + 64'(iw[4][15:0]) * 64'(yn) * 64'(xn) - 64'd1;
                lim0 = sp_rows(iw[0][17:16]);
                ly_n <= yn;
                lx_n <= xn;
              end
              OP_STORE: begin
                m0 = 64'(iw[2]) + 64'(iw[4][15:0]) * 64'(iw[3][31:16]) * 64'(iw[3][15:0]) - 64'd1;
                lim0 = sp_rows(iw[0][17:16]);
                ly_n <= 17'(iw[3][31:16]);
                lx_n <= 17'(iw[3][15:0]);
              end
              OP_GEMM: begin
                logic [63:0] o1, i1, r1;
                o1 = 64'(iw[3][15:0]) - 64'd1;
                i1 = 64'(iw[3][31:16]) - 64'd1;
                r1 = 64'(iw[2][31:16]) - 64'd1;
                m0 = 64'(iw[1][15:0]) + o1 * 64'(iw[4][15:0]) + i1 * 64'(iw[4][31:16]) +
                     r1 * 64'(iw[5][15:0]);
                m1 = 64'(iw[1][31:16]) + o1 * 64'(iw[7][15:0]) + i1 * 64'(iw[7][31:16]);
                m2 = 64'(iw[2][15:0]) + o1 * 64'(iw[5][31:16]) + i1 * 64'(iw[6][15:0]) +
                     r1 * 64'(iw[6][31:16]);
                lim0 = 64'(ACT_ROWS);
                lim1 = 64'(WGT_TILES);
                lim2 = 64'(ACC_ROWS);
              end
              OP_VEC: begin
                // src (window included), aux, dst, then the parameter rows.
                logic [63:0] o1, r1, kw, kh, ext;
                logic [3:0]  md;
                md = iw[0][19:16];
                o1 = 64'(iw[3][15:0]) - 64'd1;
                r1 = 64'(iw[2][31:16]) - 64'd1;
                kw = vec_window(md) ? 64'(iw[7][7:0]) : 64'd1;
                kh = vec_window(md) ? 64'(iw[7][15:8]) : 64'd1;
                ext = o1 * 64'(iw[4][15:0]) + r1 * 64'(iw[4][31:16]) +
                      (kh - 64'd1) * 64'(iw[7][31:16]) + (kw - 64'd1);
                m0 = 64'(iw[1][15:0]) + ext;
                lim0 = (md == VEC_REQUANT[3:0]) ? 64'(ACC_ROWS) : 64'(ACT_ROWS);
                if (md == VEC_ADD[3:0] || md == VEC_MUL[3:0]) begin
                  m1 = 64'(iw[6][31:16]) + ext;
                  lim1 = 64'(ACT_ROWS);
                end else if (md == VEC_DWCONV[3:0]) begin
                  m1 = 64'(iw[6][31:16]) + kh * kw - 64'd1;
                  lim1 = 64'(WGT_ROWS);
                end
                m2 = 64'(iw[1][31:16]) + o1 * 64'(iw[5][15:0]) + r1 * 64'(iw[5][31:16]);
                lim2 = 64'(ACT_ROWS);
                if (md == VEC_REQUANT[3:0] || md == VEC_DWCONV[3:0]) begin
                  m3 = 64'(iw[2][15:0]) + 64'd2;
                  lim3 = 64'(ACC_ROWS);
                end else if (md == VEC_LUT[3:0]) begin
                  m3 = 64'(iw[2][15:0]) + 64'(LUT_ROWS) - 64'd1;
                  lim3 = 64'(ACT_ROWS);
                end else if (md != VEC_MAXPOOL[3:0]) begin
                  m3 = 64'(iw[2][15:0]);
                  lim3 = 64'(ACC_ROWS);
                end
              end
              default: ;
            endcase
            if (m0 >= lim0 || m1 >= lim1 || m2 >= lim2 || m3 >= lim3) begin
              raise = 1'b1;
              r_code = ERR_SP_RANGE;
              r_addr = (m0 >= lim0) ? m0[31:0] : (m1 >= lim1) ? m1[31:0] :
                       (m2 >= lim2) ? m2[31:0] : m3[31:0];
            end else begin
              sp_q <= iw[0][17:16];
              row_q <= iw[2];
              len_q <= ((iw[0][31:24] == 0) ? 8'(N) : iw[0][31:24]) <<
                       ((iw[0][17:16] == SP_ACC[1:0]) ? 2 : 0);
              unique case (op)
                OP_LOAD: begin
                ld_done_q <= 1'b0;
                ldq_req_valid_q <= 1'b0;
                st_q <= S_LD_ROW;
              end
                OP_STORE: begin
                  act_ra_q <= AAW'(iw[2]);
                  wgt_ra_q <= WAW'(iw[2]);
                  acc_ra_q <= CAW'(iw[2]);
                  st_done_q <= 1'b0;
                  stq_req_valid_q <= 1'b0;
                  st_q <= S_ST_RUN;
                end
                OP_GEMM:  st_q <= S_G_BLK;
                OP_VEC: begin
                  acc_ra_q <= CAW'(iw[2][15:0]);
                  act_ra_q <= AAW'(iw[2][15:0]);
                  k_q <= '0;
                  st_q <= S_V_SETUP;
                end
                default:  st_q <= S_COMPLETE;   // NOP, SYNC
              endcase
            end
          end

          // ------------------------------------------------------------ LOAD
          // Rows are generated in (z, y, x) order at up to one per cycle: padding rows are
        // written here, DRAM rows go to npu_ldq and come back in order. Returned rows own the
        // scratchpad write port; padding waits a cycle when both want it.
        S_LD_ROW: begin
          logic accepted;
          accepted = ldq_req_valid_q && ldq_req_ready;
          if (accepted) ldq_req_valid_q <= 1'b0;
          if (ldq_row_valid) begin
            unique case (sp_q)
              SP_ACT[1:0]: begin
                act_mem[AAW'(ldq_row_idx)] <= ldq_row_data[N*8-1:0];
                act_tag[AAW'(ldq_row_idx)] <= epoch_q;
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
          if (!ld_done_q && (!ldq_req_valid_q || accepted) && !ldq_err) begin
            logic [16:0] y0, x0;
            logic pad, adv;
            y0 = 17'(ly_q) - 17'(iw[4][27:24]);
            x0 = 17'(lx_q) - 17'(iw[4][19:16]);
            pad = (17'(ly_q) < 17'(iw[4][27:24])) || (y0 >= 17'(iw[3][31:16])) ||
                  (17'(lx_q) < 17'(iw[4][19:16])) || (x0 >= 17'(iw[3][15:0]));
            adv = 1'b0;
            if (pad) begin
              if (!ldq_row_valid) begin
                unique case (sp_q)
                  SP_ACT[1:0]: begin act_mem[AAW'(row_q)] <= '0; act_tag[AAW'(row_q)] <= epoch_q; end
                  SP_WGT[1:0]: begin wgt_mem[WAW'(row_q)] <= '0; wgt_tag[WAW'(row_q)] <= epoch_q; end
                  default: begin acc_mem[CAW'(row_q)] <= '0; acc_tag[CAW'(row_q)] <= epoch_q; end
                endcase
                adv = 1'b1;
              end
            end else begin
              ldq_req_valid_q <= 1'b1;
              ldq_req_va_q <= iw[1] + 32'(lz_q) * iw[7] + 32'(y0[15:0]) * iw[6] +
                              32'(x0[15:0]) * iw[5];
              ldq_req_row_q <= row_q;
              adv = 1'b1;
            end
            if (adv) begin
              row_q <= row_q + 32'd1;
              if (17'(lx_q) + 1 == lx_n) begin
                lx_q <= '0;
                if (17'(ly_q) + 1 == ly_n) begin
                  ly_q <= '0;
                  lz_q <= lz_q + 16'd1;
                  if (lz_q + 16'd1 == iw[4][15:0]) ld_done_q <= 1'b1;
                end else begin
                  ly_q <= ly_q + 16'd1;
                end
              end else begin
                lx_q <= lx_q + 16'd1;
              end
            end
          end
          // Finished once every row was handed over (a request accepted this cycle is not yet
          // visible in ldq_idle) and the queue drained.
          if (ldq_idle && (ldq_err || (ld_done_q && !ldq_req_valid_q))) begin
            ldq_req_valid_q <= 1'b0;
            if (ldq_err) begin
              raise = 1'b1;
              r_code = ldq_err_code;
              r_addr = ldq_err_addr;
            end else begin
              st_q <= S_COMPLETE;
            end
          end
        end

          // ------------------------------------------------------------ STORE
          // One row per request to npu_stq, in (z, y, x) order. The scratchpad read address
          // runs one row ahead, so the row for the next request is always on the read port.
          S_ST_RUN: begin
            logic accepted;
            accepted = stq_req_valid_q && stq_req_ready;
            if (accepted) stq_req_valid_q <= 1'b0;
            if (stq_row_done)
              cnt_q[CNT_DMA_WR_BYTES] <= cnt_q[CNT_DMA_WR_BYTES] + 64'(stq_row_len);
            if (!st_done_q && (!stq_req_valid_q || accepted) && !stq_err) begin
              logic [31:0] nrow;
              unique case (sp_q)
                SP_ACT[1:0]: stq_req_data_q <= RB'(act_rd);
                SP_WGT[1:0]: stq_req_data_q <= RB'(wgt_rd);
                default: stq_req_data_q <= acc_rd;
              endcase
              stq_req_valid_q <= 1'b1;
              stq_req_va_q <= iw[1] + 32'(lz_q) * iw[7] + 32'(ly_q) * iw[6] + 32'(lx_q) * iw[5];
              nrow = row_q + 32'd1;
              row_q <= nrow;
              act_ra_q <= AAW'(nrow);
              wgt_ra_q <= WAW'(nrow);
              acc_ra_q <= CAW'(nrow);
              if (17'(lx_q) + 1 == lx_n) begin
                lx_q <= '0;
                if (17'(ly_q) + 1 == ly_n) begin
                  ly_q <= '0;
                  lz_q <= lz_q + 16'd1;
                  if (lz_q + 16'd1 == iw[4][15:0]) st_done_q <= 1'b1;
                end else begin
                  ly_q <= ly_q + 16'd1;
                end
              end else begin
                lx_q <= lx_q + 16'd1;
              end
            end
            if (stq_idle && (stq_err || (st_done_q && !stq_req_valid_q))) begin
              stq_req_valid_q <= 1'b0;
              if (stq_err) begin
                raise = 1'b1;
                r_code = stq_err_code;
                r_addr = stq_err_addr;
              end else begin
                st_q <= S_COMPLETE;
              end
            end
          end

          // ------------------------------------------------------------ GEMM
          // lz_q = o, ly_q = i, lx_q = r.
          // Weight double buffering: a loader fills wnext_q one WGT row per cycle while the
          // array streams the current block, so a block costs max(R, N) cycles after the first.
          S_G_BLK: begin
            wgt_ra_q <= WAW'(g_tile(lz_q, ly_q) * N);
            wl_run_q <= 1'b1;
            k_q <= '0;
            st_q <= S_G_WLOAD;
          end

          S_G_WLOAD: begin
            // Waiting for the loader: swap as soon as the tile is complete.
            if (wl_full) begin
              g_swap = 1'b1;
              st_q <= S_G_RUN;
            end
          end

          S_G_RUN: begin
            logic [N*32-1:0] p;
            p = mac_row(act_rd, wtile_q);
            acc_mem[acc_ra_q] <= (iw[0][16] && ly_q == 0) ? p : add_rows(acc_rd, p);
            acc_tag[acc_ra_q] <= epoch_q;
            act_ra_q <= act_ra_q + AAW'(iw[5][15:0]);
            acc_ra_q <= acc_ra_q + CAW'(iw[6][31:16]);
            lx_q <= lx_q + 16'd1;
            if (lx_q + 16'd1 == iw[2][31:16]) begin
              if (!g_next_v) begin
                st_q <= S_COMPLETE;
                cnt_q[CNT_MACS] <= cnt_q[CNT_MACS] + 64'(iw[3][15:0]) * 64'(iw[3][31:16]) *
                                   64'(iw[2][31:16]) * 64'(N * N);
              end else begin
                lz_q <= g_next_o;
                ly_q <= g_next_i;
                if (wl_full) g_swap = 1'b1;
                else st_q <= S_G_WLOAD;
              end
            end
          end

          // ------------------------------------------------------------ VEC
          // Setup: REQUANT/DWCONV read the bias, multiplier and shift rows P..P+2; ADD, MUL,
          // AVGPOOL read the scalars of row P; LUT reads its 256/N table rows. Then one source
          // element per cycle: REQUANT and LUT one row per output row, ADD/MUL rows a and b,
          // window modes kh*kw rows. lz_q = o, lx_q = r.
          S_V_SETUP: begin
            logic [3:0] md;
            md = iw[0][19:16];
            k_q <= k_q + 16'd1;
            if (md == VEC_REQUANT[3:0] || md == VEC_DWCONV[3:0]) begin
              if (k_q == 16'd0) v_bias_q <= iw[0][20] ? acc_rd : '0;
              if (k_q == 16'd1) v_mul_q <= acc_rd;
              if (k_q == 16'd2) v_shift_q <= acc_rd;
              acc_ra_q <= acc_ra_q + 1'b1;
            end else if (md == VEC_LUT[3:0]) begin
              if (k_q < 16'(LUT_ROWS)) begin
                v_table_q <= {act_rd, v_table_q[2047:N*8]};
                act_ra_q <= act_ra_q + 1'b1;
              end
            end else if (k_q == 16'd0) begin
              v_par_q <= acc_rd[159:0];
            end
            if (k_q + 16'd1 == vec_setup(md)) begin
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
              st_q <= S_V_RUN;
            end
          end

          S_V_RUN: begin
            logic [3:0]     md;
            logic           row_done;
            logic [N*8-1:0] outrow;
            md = iw[0][19:16];
            row_done = 1'b0;
            outrow = '0;
            unique case (md)
              VEC_REQUANT[3:0]: begin
                outrow = requant_row(acc_rd, v_bias_q, v_mul_q, v_shift_q, iw[3][23:16],
                                     iw[6][7:0], iw[6][15:8]);
                row_done = 1'b1;
              end
              VEC_LUT[3:0]: begin
                outrow = lut_row(act_rd, v_table_q, iw[6][7:0], iw[6][15:8]);
                row_done = 1'b1;
              end
              VEC_ADD[3:0], VEC_MUL[3:0]: begin
                if (!v_ph_q) begin
                  v_a_q <= act_rd;
                  act_ra_q <= AAW'(v_ab_q);
                  v_ph_q <= 1'b1;
                end else begin
                  outrow = addmul_row(md == VEC_MUL[3:0], v_a_q, act_rd, v_par_q, iw[3][23:16],
                                      iw[6][7:0], iw[6][15:8]);
                  v_ph_q <= 1'b0;
                  row_done = 1'b1;
                end
              end
              default: begin
                logic [N*32-1:0] acc;
                acc = window_step(md, v_ky_q == 0 && v_kx_q == 0, v_accum_q, act_rd, wgt_rd);
                if (v_ky_q + 8'd1 == iw[7][15:8] && v_kx_q + 8'd1 == iw[7][7:0]) begin
                  if (md == VEC_DWCONV[3:0])
                    outrow = requant_row(acc, v_bias_q, v_mul_q, v_shift_q, iw[3][23:16],
                                         iw[6][7:0], iw[6][15:8]);
                  else
                    outrow = pool_row(md, acc, v_par_q, 16'(iw[7][15:8]) * 16'(iw[7][7:0]),
                                      iw[3][23:16], iw[6][7:0], iw[6][15:8]);
                  row_done = 1'b1;
                end else begin
                  v_accum_q <= acc;
                  wgt_ra_q <= wgt_ra_q + 1'b1;
                  if (v_kx_q + 8'd1 == iw[7][7:0]) begin
                    v_kx_q <= '0;
                    v_ky_q <= v_ky_q + 8'd1;
                    v_line_q <= v_line_q + 32'(iw[7][31:16]);
                    act_ra_q <= AAW'(v_line_q + 32'(iw[7][31:16]));
                  end else begin
                    v_kx_q <= v_kx_q + 8'd1;
                    act_ra_q <= act_ra_q + 1'b1;
                  end
                end
              end
            endcase
            if (row_done) begin
              logic [31:0]    nb, na;
              logic [AAW-1:0] nd;
              act_mem[v_dst_q] <= outrow;
              act_tag[v_dst_q] <= epoch_q;
              if (lx_q + 16'd1 == iw[2][31:16]) begin
                nb = v_so_q + 32'(iw[4][15:0]);
                na = v_ao_q + 32'(iw[4][15:0]);
                nd = v_dst_o_q + AAW'(iw[5][15:0]);
                v_so_q <= nb;
                v_ao_q <= na;
                v_dst_o_q <= nd;
                lx_q <= '0;
                lz_q <= lz_q + 16'd1;
                if (lz_q + 16'd1 == iw[3][15:0]) st_q <= S_COMPLETE;
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

          // ------------------------------------------------------------ completion
          S_COMPLETE: begin
            logic [1:0] eng;
            eng = engine_of(iw[0][7:0], iw[0][17:16]);
            if (push_prev && tok_q[ch_push_prev(eng)] == 8'(MAX_TOKENS)) begin
              raise = 1'b1;
              r_code = ERR_TOKEN_DEADLOCK;
              r_addr = 32'(ch_push_prev(eng));
            end else if (push_next && tok_q[ch_push_next(eng)] == 8'(MAX_TOKENS)) begin
              raise = 1'b1;
              r_code = ERR_TOKEN_DEADLOCK;
              r_addr = 32'(ch_push_next(eng));
            end else begin
              if (push_prev) tok_q[ch_push_prev(eng)] <= tok_q[ch_push_prev(eng)] + 8'd1;
              if (push_next) tok_q[ch_push_next(eng)] <= tok_q[ch_push_next(eng)] + 8'd1;
              cnt_q[CNT_INSTRS] <= cnt_q[CNT_INSTRS] + 64'd1;
              trace_valid_o <= 1'b1;
              trace_queue_o <= 8'(q_q);
              trace_offset_o <= pc_q;
              for (int i = 0; i < 8; i++) trace_instr_o[i*32 +: 32] <= iw[i];
              if (pc_q + 32'd32 == cb_len_q) begin
                cnt_q[CNT_JOBS] <= cnt_q[CNT_JOBS] + 64'd1;
                ring_head_q[q_q] <= (ring_head_q[q_q] + 32'd32) & (ring_size_q[q_q] - 32'd1);
                in_job_q <= 1'b0;
                st_q <= S_IDLE;
              end else begin
                pc_q <= pc_q + 32'd32;
                st_q <= S_FETCH;
              end
            end
          end

          default: st_q <= S_IDLE;
        endcase

        // GEMM: put the loaded tile in the array and start the block (lz_q, ly_q) after a RUN's
        // last row (or from S_G_WLOAD); the loader moves on to the block after it.
        if (g_swap) begin
          logic [15:0] so, si;
          so = (st_q == S_G_RUN) ? g_next_o : lz_q;
          si = (st_q == S_G_RUN) ? g_next_i : ly_q;
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

        if (raise) begin
          err_code_q <= r_code;
          err_addr_q <= r_addr;
          err_queue_q <= r_queue;
          err_instr_q <= in_job_q ? pc_q : 32'hFFFF_FFFF;
          irq_next[8] = 1'b1;
          in_job_q <= 1'b0;
          st_q <= S_IDLE;
        end
      end  // !hold_i
      irq_status_q <= irq_next;
    end
  end
endmodule
